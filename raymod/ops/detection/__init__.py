"""Object detection operators: ROI pooling and alignment, region proposals, SSD multibox, NMS."""
