"""Random sampling operators, drawn from raymod's seeded generators (``rm.random.seed``)."""
