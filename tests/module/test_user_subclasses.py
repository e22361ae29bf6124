"""Acceptance: user subclasses of Module written against MXNet 1.x keep working.

The two classes below are the user variants of our reference material
(``module_variants.txt``: ``OldModule``, a Module subclass overriding ``bind`` with MXNet's
internals, and ``DetModule``, a detection codebase's BaseModule subclass with its own
executor-group handling and a fit over lists of batches) with ``mx.`` changed to ``rm.`` and
their imports pointed at raymod. Docstrings and comment lines are left out (no behaviour).
Lines changed beyond that, each marked ``# CHANGED (n)``:

(1) ``zeros(shape=x[0].shape, dtype=x[0].dtype, stype=x[0].stype)`` (in both classes' bind)
    loses ``stype=x[0].stype``: the executor group's arrays are numpy/CuPy arrays, which have
    no ``stype`` (raymod is dense only; MXNet's value here is always ``'default'``).
The import block stands in for MXNet's module paths; ``mxnet.__version__`` (read by
DetModule.update_metric to decide whether ``pre_sliced`` may be passed) comes from a stand-in
namespace until ``raymod.compat.mxnet`` provides it. DetModule reads ``param_val.stype`` in
``_sync_params_from_devices`` when a kvstore runs the optimizer; with two devices the tests
set ``MXNET_UPDATE_ON_KVSTORE=0`` (devices update, the kvstore sums), the set-up where that
branch is not taken. DetModule's ``init_params`` calls ``cache_arr.copyto(arr)`` (an NDArray
method numpy lacks) when given parameter values that are not its own arrays; the tests
initialise through the initializer instead.
"""
# ---- imports: MXNet's module paths -> raymod's --------------------------------------------
import logging
import time
import warnings
from types import SimpleNamespace

import numpy as nd
import numpy as np
import pytest
from numpy import zeros

import raymod as rm
from raymod import context as ctx
from raymod import metric
from raymod import optimizer as opt
from raymod.initializer import InitDesc, Uniform
from raymod.io import DataBatch, DataDesc
from raymod.model import (BatchEndParam, _create_kvstore, _initialize_kvstore,
                          _update_params, _update_params_on_kvstore, load_checkpoint)
from raymod.module import Module
from raymod.module.base_module import (BaseModule, _as_list, _check_input_names,
                                       _parse_data_desc)
from raymod.parallel import DataParallelExecutorGroup

mxnet = SimpleNamespace(__version__="1.9.1")  # stand-in: what raymod.compat.mxnet will say


# ---- the user variants (module_variants.txt) ----------------------------------------------
class OldModule(Module):
    def bind(self,
             data_shapes,
             label_shapes=None,
             for_training=True,
             inputs_need_grad=False,
             force_rebind=False,
             shared_module=None,
             grad_req='write'):
        if force_rebind:
            self._reset_bind()

        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req

        if not for_training:
            assert not inputs_need_grad
        else:
            pass

        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        if shared_module is not None:
            assert isinstance(shared_module, Module) and \
                    shared_module.binded and shared_module.params_initialized
            shared_group = shared_module._exec_group
            assert len(shared_group.execs) >= len(self._context)
        else:
            shared_group = None

        self._exec_group = DataParallelExecutorGroup(
            self._symbol,
            self._context,
            self._work_load_list,
            self._data_shapes,
            self._label_shapes,
            self._param_names,
            for_training,
            inputs_need_grad,
            shared_group,
            logger=self.logger,
            fixed_param_names=self._fixed_param_names,
            grad_req=grad_req,
            group2ctxs=self._group2ctxs,
            state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            assert self._arg_params is None and self._aux_params is None
            param_arrays = [
                zeros(shape=x[0].shape, dtype=x[0].dtype)  # CHANGED (1)
                for x in self._exec_group.param_arrays
            ]
            self._arg_params = {
                name: arr
                for name, arr in zip(self._param_names, param_arrays)
            }

            aux_arrays = [
                zeros(x[0].shape, dtype=x[0].dtype)
                for x in self._exec_group.aux_arrays
            ]
            self._aux_params = {
                name: arr
                for name, arr in zip(self._aux_names, aux_arrays)
            }

        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)


class DetModule(BaseModule):
    def __init__(self,
                 symbol,
                 data_names=None,
                 label_names=None,
                 logger=logging,
                 context=ctx.cpu(),
                 fixed_param=None,
                 excluded_param=None):
        super(DetModule, self).__init__(logger=logger)

        if isinstance(context, ctx.Context):
            context = [context]
        self._context = context
        work_load_list = [1] * len(self._context)
        assert len(work_load_list) == len(self._context)
        self._work_load_list = work_load_list

        self._group2ctxs = None

        self._symbol = symbol

        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = []

        fixed_param_names = list()
        if fixed_param is not None:
            for name in self._symbol.list_arguments():
                for fixed_partial_name in fixed_param:
                    if fixed_partial_name in name:
                        fixed_param_names.append(name)
        if excluded_param is not None:
            for name in fixed_param_names.copy():
                for excluded_partial_name in excluded_param:
                    if excluded_partial_name in name:
                        fixed_param_names.remove(name)
        logger.info("fixed parameters: {}".format(fixed_param_names))

        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

        arg_names = symbol.list_arguments()
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in arg_names if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()

        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False

        self._compression_params = None
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._grad_req = None

        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = DetModule(symbol=sym, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = '%s-%04d.states' % (prefix, epoch)
        return mod

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False):
        self._symbol.save('%s-symbol.json' % prefix)
        param_name = '%s-%04d.params' % (prefix, epoch)
        self.save_params(param_name)
        logging.info('Saved checkpoint to \"%s\"', param_name)
        if save_optimizer_states:
            state_name = '%s-%04d.states' % (prefix, epoch)
            self.save_optimizer_states(state_name)
            logging.info('Saved optimizer state to \"%s\"', state_name)

    def _reset_bind(self):
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._output_names

    @property
    def data_shapes(self):
        assert self.binded
        return self._data_shapes

    @property
    def label_shapes(self):
        assert self.binded
        return self._label_shapes

    @property
    def output_shapes(self):
        assert self.binded
        return self._exec_group.get_output_shapes()

    def get_params(self):
        assert self.binded and self.params_initialized

        if self._params_dirty:
            self._sync_params_from_devices()
        return (self._arg_params, self._aux_params)

    def init_params(self,
                    initializer=Uniform(0.01),
                    arg_params=None,
                    aux_params=None,
                    allow_missing=False,
                    force_init=False,
                    allow_extra=False):
        if self.params_initialized and not force_init:
            warnings.warn(
                "Parameters already initialized and force_init=False. "
                "init_params call ignored.",
                stacklevel=2)
            return
        assert self.binded, 'call bind before initializing the parameters'

        def _impl(name, arr, cache):
            if cache is not None:
                if name in cache:
                    cache_arr = cache[name]

                    if cache_arr is not arr:
                        cache_arr.copyto(arr)
                else:
                    if not allow_missing:
                        raise RuntimeError("%s is not presented" % name)
                    if initializer is not None:
                        initializer(name, arr)
            else:
                initializer(name, arr)

        attrs = self._symbol.attr_dict()
        for name, arr in sorted(self._arg_params.items()):
            desc = InitDesc(name, attrs.get(name, None))
            _impl(desc, arr, arg_params)

        for name, arr in sorted(self._aux_params.items()):
            desc = InitDesc(name, attrs.get(name, None))
            _impl(desc, arr, aux_params)

        self.params_initialized = True
        self._params_dirty = False

        self._exec_group.set_params(self._arg_params,
                                    self._aux_params,
                                    allow_extra=allow_extra)

    def set_params(self,
                   arg_params,
                   aux_params,
                   allow_missing=False,
                   force_init=True,
                   allow_extra=False):
        if not allow_missing:
            self.init_params(initializer=None,
                             arg_params=arg_params,
                             aux_params=aux_params,
                             allow_missing=allow_missing,
                             force_init=force_init,
                             allow_extra=allow_extra)
            return

        if self.params_initialized and not force_init:
            warnings.warn(
                "Parameters already initialized and force_init=False. "
                "set_params call ignored.",
                stacklevel=2)
            return

        self._exec_group.set_params(arg_params,
                                    aux_params,
                                    allow_extra=allow_extra)

        self._params_dirty = True
        self.params_initialized = True

    def bind(self,
             data_shapes,
             label_shapes=None,
             for_training=True,
             inputs_need_grad=False,
             force_rebind=False,
             shared_module=None,
             grad_req='write'):
        if force_rebind:
            self._reset_bind()

        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req

        if not for_training:
            assert not inputs_need_grad
        else:
            pass

        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        if shared_module is not None:
            assert isinstance(shared_module, Module) and \
                    shared_module.binded and shared_module.params_initialized
            shared_group = shared_module._exec_group
            assert len(shared_group.execs) >= len(self._context)
        else:
            shared_group = None

        self._exec_group = DataParallelExecutorGroup(
            self._symbol,
            self._context,
            self._work_load_list,
            self._data_shapes,
            self._label_shapes,
            self._param_names,
            for_training,
            inputs_need_grad,
            shared_group,
            logger=self.logger,
            fixed_param_names=self._fixed_param_names,
            grad_req=grad_req,
            group2ctxs=self._group2ctxs,
            state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            assert self._arg_params is None and self._aux_params is None
            param_arrays = [
                zeros(shape=x[0].shape, dtype=x[0].dtype)  # CHANGED (1)
                for x in self._exec_group.param_arrays
            ]
            self._arg_params = {
                name: arr
                for name, arr in zip(self._param_names, param_arrays)
            }

            aux_arrays = [
                zeros(x[0].shape, dtype=x[0].dtype)
                for x in self._exec_group.aux_arrays
            ]
            self._aux_params = {
                name: arr
                for name, arr in zip(self._aux_names, aux_arrays)
            }

        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

    def reshape(self, data_shapes, label_shapes=None):
        assert self.binded
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    def init_optimizer(self,
                       kvstore='local',
                       optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01), ),
                       force_init=False):
        assert self.binded and self.params_initialized

        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring...')
            return

        if self._params_dirty:
            self._sync_params_from_devices()

        (kvstore, update_on_kvstore) = \
                _create_kvstore(kvstore, len(self._context), self._arg_params)

        batch_size = self._exec_group.batch_size
        if kvstore and 'dist' in kvstore.type and '_sync' in kvstore.type:
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size

        if isinstance(optimizer, str):
            idx2name = {}
            if update_on_kvstore:
                idx2name.update(enumerate(self._exec_group.param_names))
            else:
                for k in range(len(self._context)):
                    idx2name.update({
                        i * len(self._context) + k: n
                        for i, n in enumerate(self._exec_group.param_names)
                    })
            optimizer_params = dict(optimizer_params)
            if 'rescale_grad' not in optimizer_params:
                optimizer_params['rescale_grad'] = rescale_grad
            optimizer = opt.create(optimizer,
                                   sym=self.symbol,
                                   param_idx2name=idx2name,
                                   **optimizer_params)
        else:
            assert isinstance(optimizer, opt.Optimizer)
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(
                    "Optimizer created manually outside Module but rescale_grad "
                    +
                    "is not normalized to 1.0/batch_size/num_workers (%s vs. %s). "
                    % (optimizer.rescale_grad, rescale_grad) +
                    "Is this intended?",
                    stacklevel=2)

        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None

        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            _initialize_kvstore(kvstore=kvstore,
                                param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params,
                                param_names=self._param_names,
                                update_on_kvstore=update_on_kvstore)

        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)

        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        assert shared_module.optimizer_initialized
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        assert self.binded and self.params_initialized

        curr_data_shapes = tuple(i.shape for i in self._data_shapes)
        if isinstance(data_batch, list):
            assert data_batch is not None, "Encountered empty data batch"
            new_data_shapes = []
            for i in range(len(data_batch[0].data)):
                shape = data_batch[0].data[i].shape
                for db in data_batch:
                    assert shape == db.data[i].shape, \
                        "All data batches in a list need to have the same shape"
                new_batch_size = len(data_batch) * shape[0]
                new_data_shapes.append((new_batch_size, ) + shape[1:])
            new_data_shapes = tuple(new_data_shapes)
        else:
            new_data_shapes = tuple(i.shape for i in data_batch.data)

        if curr_data_shapes != new_data_shapes:
            if hasattr(data_batch, "provide_data") and data_batch.provide_data:
                new_dshape = data_batch.provide_data
            else:
                new_dshape = [DataDesc(i.name, shape, i.dtype, i.layout) \
                              for i, shape in zip(self._data_shapes, new_data_shapes)]

            if hasattr(data_batch,
                       "provide_label") and data_batch.provide_label:
                new_lshape = data_batch.provide_label
            elif hasattr(data_batch, "label") and data_batch.label:
                new_lshape = [DataDesc(i.name, j.shape, i.dtype, i.layout) \
                              for i, j in zip(self._label_shapes, data_batch.label)]
            else:
                new_lshape = None

            self.reshape(new_dshape, new_lshape)

        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        assert self.binded and self.params_initialized
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        assert self.binded and self.params_initialized and self.optimizer_initialized

        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._exec_group.param_arrays,
                                      self._exec_group.grad_arrays,
                                      self._kvstore,
                                      self._exec_group.param_names)
        else:
            _update_params(self._exec_group.param_arrays,
                           self._exec_group.grad_arrays,
                           updater=self._updater,
                           num_device=len(self._context),
                           kvstore=self._kvstore,
                           param_names=self._exec_group.param_names)

    def get_outputs(self, merge_multi_context=True):
        assert self.binded and self.params_initialized
        return self._exec_group.get_outputs(
            merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        assert self.binded and self.params_initialized and self.inputs_need_grad
        return self._exec_group.get_input_grads(
            merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context=True):
        assert self.binded and self.params_initialized
        return self._exec_group.get_states(
            merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        assert self.binded and self.params_initialized
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        if mxnet.__version__ >= "1.3.0":
            self._exec_group.update_metric(eval_metric, labels, pre_sliced)
        else:
            self._exec_group.update_metric(eval_metric, labels)

    def _sync_params_from_devices(self):
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            for param_name, param_val in sorted(self._arg_params.items()):
                if param_val.stype == 'row_sparse':
                    row_ids = nd.arange(0, param_val.shape[0], dtype='int64')
                    self._kvstore.row_sparse_pull(param_name,
                                                  param_val,
                                                  row_ids=row_ids)
        self._params_dirty = False

    def save_optimizer_states(self, fname):
        assert self.optimizer_initialized

        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            with open(fname, 'wb') as fout:
                fout.write(self._updater.get_states())

    def load_optimizer_states(self, fname):
        assert self.optimizer_initialized

        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            self._updater.set_states(open(fname, 'rb').read())

    def install_monitor(self, mon):
        assert self.binded
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        assert self.binded
        if sparse_row_id_fn is not None:
            if not self._kvstore or not self._update_on_kvstore:
                warnings.warn(
                    UserWarning("Parameters are not updated in the KVStore. "
                                "No need to call sparse_row_id_fn."))
            else:
                row_ids = sparse_row_id_fn(data_batch)
                assert (isinstance(
                    row_ids,
                    dict)), "Expected dict output from sparse_row_id_fn"
                for param_name, row_id in row_ids.items():
                    param_idx = self._exec_group.param_names.index(param_name)
                    param_val = self._exec_group.param_arrays[param_idx]
                    assert (isinstance(param_val, (tuple, list)))
                    if param_val[0].stype != 'row_sparse':
                        warnings.warn(
                            UserWarning(
                                "%s.stype is not 'row_sparse'. No need to "
                                "perform row_sparse_pull." % param_name))
                    else:
                        self._kvstore.row_sparse_pull(param_name,
                                                      param_val,
                                                      row_ids=row_id,
                                                      priority=-param_idx)

    def fit(self,
            train_data,
            eval_data=None,
            eval_metric='acc',
            epoch_end_callback=None,
            batch_end_callback=None,
            kvstore='local',
            optimizer='sgd',
            optimizer_params=(('learning_rate', 0.01), ),
            eval_end_callback=None,
            eval_batch_end_callback=None,
            initializer=Uniform(0.01),
            arg_params=None,
            aux_params=None,
            allow_missing=False,
            force_rebind=False,
            force_init=False,
            begin_epoch=0,
            num_epoch=None,
            validation_metric=None,
            monitor=None,
            sparse_row_id_fn=None,
            profile=False):
        assert num_epoch is not None, 'please specify number of epochs'

        self.bind(data_shapes=train_data.provide_data,
                  label_shapes=train_data.provide_label,
                  for_training=True,
                  force_rebind=force_rebind)

        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer,
                         arg_params=arg_params,
                         aux_params=aux_params,
                         allow_missing=allow_missing,
                         force_init=force_init)
        self.init_optimizer(kvstore=kvstore,
                            optimizer=optimizer,
                            optimizer_params=optimizer_params)

        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            next_data_batch = next(data_iter)
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                self.update()

                if isinstance(data_batch, list):
                    self.update_metric(eval_metric,
                                       [db.label for db in data_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, data_batch.label)

                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch,
                                 sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True

                if monitor is not None:
                    monitor.toc_print()

                if end_of_batch:
                    eval_name_vals = eval_metric.get_name_value()

                if batch_end_callback is not None:
                    batch_end_params = BatchEndParam(epoch=epoch,
                                                     nbatch=nbatch,
                                                     eval_metric=eval_metric,
                                                     locals=locals())
                    for callback in _as_list(batch_end_callback):
                        callback(batch_end_params)
                nbatch += 1

                if profile is True and nbatch == 10:
                    self.logger.info("Profiling ends")
                    import raymod as rm  # import
                    rm.profiler.dump()

            for name, val in eval_name_vals:
                self.logger.info('Epoch[%d] Train-%s=%f', epoch, name, val)
            toc = time.time()
            self.logger.info('Epoch[%d] Time cost=%.3f', epoch, (toc - tic))

            arg_params, aux_params = self.get_params()
            self.set_params(arg_params, aux_params)

            if epoch_end_callback is not None and self._kvstore.rank == 0:
                for callback in _as_list(epoch_end_callback):
                    callback(epoch, self.symbol, arg_params, aux_params)

            train_data.reset()



# ---- the acceptance tests ------------------------------------------------------------------
BATCH = 20
FIT = dict(optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})


def convnet():
    data = rm.sym.Variable("data")
    net = rm.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="conv1")
    net = rm.sym.Pooling(rm.sym.Activation(net, act_type="relu"), pool_type="max",
                         kernel=(2, 2), stride=(2, 2))
    net = rm.sym.FullyConnected(rm.sym.Flatten(net), num_hidden=3, name="fc1")
    return rm.sym.SoftmaxOutput(net, name="softmax")


def images(rows=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 1, 8, 8)).astype(np.float32)
    y = np.stack([x[:, 0, :4, :4].mean((1, 2)), x[:, 0, 4:, :4].mean((1, 2)),
                  x[:, 0, :, 4:].mean((1, 2))], axis=1).argmax(axis=1).astype(np.float32)
    return x, y


def batches():
    x, y = images()
    return rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=11)


class PairIter:
    """Each step a list of 2 batches, one per device (DetModule's pre-sliced input)."""

    def __init__(self, inner):
        self.inner = inner
        self.provide_data, self.provide_label = inner.provide_data, inner.provide_label

    def __iter__(self):
        return self

    def __next__(self):
        batch = next(self.inner)
        half = batch.data[0].shape[0] // 2
        return [DataBatch([batch.data[0][part]], [batch.label[0][part]])
                for part in (slice(0, half), slice(half, None))]

    def reset(self):
        self.inner.reset()


def train(mod, data, epochs=2, **kw):
    rm.random.seed(7)  # same initial values in every run (the initializer draws in name order)
    metric_ = rm.metric.create("acc")
    mod.fit(data, num_epoch=epochs, initializer=rm.init.Xavier(), eval_metric=metric_,
            **FIT, **kw)
    return {k: v.copy() for k, v in mod.get_params()[0].items()}, metric_.get()[1]


def reference(context=ctx.cpu(), epochs=2, **kw):
    return train(rm.mod.Module(convnet(), context=context, **kw), batches(), epochs)


def assert_same(got, want, tol=1e-5):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=tol, atol=tol, err_msg=name)


def det_module(context=ctx.cpu(), **kw):
    return DetModule(convnet(), data_names=["data"], label_names=["softmax_label"],
                     context=context, **kw)


def test_old_module_trains_like_module():
    want, acc_want = reference()
    got, acc = train(OldModule(convnet()), batches())
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)


@pytest.mark.filterwarnings("ignore:label_shapes provide")  # MXNet warns too
def test_old_module_force_rebind_goes_through_reset_bind():
    mod = OldModule(convnet())
    params, _ = train(mod, batches(), epochs=1)
    x, _ = images(40, seed=3)
    before = mod.predict(x)
    mod.bind([("data", (40, 1, 8, 8))], for_training=False, force_rebind=True)
    assert mod.binded and not mod.for_training and mod._data_shapes[0].shape == (40, 1, 8, 8)
    assert_same(mod.get_params()[0], params, tol=0)
    np.testing.assert_allclose(mod.predict(x), before, rtol=1e-6)


def test_det_module_trains_like_module():
    want, acc_want = reference()
    got, acc = train(det_module(), batches())
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)


def test_det_module_on_lists_of_two_batches_pre_sliced(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")  # see the note at the top
    two = [ctx.cpu(0), ctx.cpu(1)]
    want, acc_want = reference(context=two)
    mod = det_module(context=two)
    got, acc = train(mod, PairIter(batches()))
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)
    assert mod._kvstore is not None and not mod._update_on_kvstore


def test_det_module_fixed_param_patterns_match_fixed_param_names():
    want, _ = reference(epochs=1, fixed_param_names=["conv1_weight", "conv1_bias"])
    mod = det_module(fixed_param=["conv1"])
    assert mod._fixed_param_names == ["conv1_weight", "conv1_bias"]
    got, _ = train(mod, batches(), epochs=1)
    assert_same(got, want)


@pytest.mark.filterwarnings("ignore:label_shapes provide")  # MXNet warns too
def test_det_module_load_reads_a_module_checkpoint(tmp_path):
    ref = rm.mod.Module(convnet())
    params, _ = train(ref, batches(), epochs=1)
    prefix = str(tmp_path / "net")
    ref.save_checkpoint(prefix, 1)
    mod = DetModule.load(prefix, 1, data_names=["data"], label_names=["softmax_label"])
    assert mod.params_initialized and not mod.binded
    mod.bind([("data", (BATCH, 1, 8, 8))], for_training=False)
    assert_same(mod.get_params()[0], params, tol=0)
    x, _ = images(BATCH, seed=4)
    np.testing.assert_allclose(mod.predict(x), ref.predict(x), rtol=1e-6)
    mod.save_checkpoint(str(tmp_path / "again"), 1)
    _, again, _ = load_checkpoint(str(tmp_path / "again"), 1)
    assert_same(again, params, tol=0)


class CountingModule(rm.mod.Module):
    """A subclass that keeps to the public executor-group interface: its own bind step
    and update_metric (a Module subclass may override these with workers=)."""

    def bind(self, *args, **kwargs):
        super().bind(*args, **kwargs)
        self.bound_outputs = self._exec_group.get_output_shapes()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self.metric_calls = getattr(self, "metric_calls", 0) + 1
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)


@pytest.mark.ray
def test_subclasses_on_workers(ray_cluster, close_modules):
    want, acc_want = reference(epochs=1)
    mod = CountingModule(convnet(), workers=2)
    close_modules(mod)
    got, acc = train(mod, batches(), epochs=1)
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)
    assert mod.metric_calls == 120 // BATCH  # fit called the override for every batch
    assert mod.bound_outputs == [("softmax_output", (BATCH, 3))]
    # a bind that builds an in-process DataParallelExecutorGroup cannot train on workers
    old = OldModule(convnet(), workers=2)
    close_modules(old)
    with pytest.raises(rm.MXNetError, match=r"OldModule\(workers=.*\) holds an in-process "
                                            "DataParallelExecutorGroup"):
        train(old, batches(), epochs=1)


def test_module_itself_fits_on_lists_of_pre_sliced_batches():
    two = [ctx.cpu(0), ctx.cpu(1)]
    want, acc_want = reference(context=two)
    mod = rm.mod.Module(convnet(), context=two)
    got, acc = train(mod, PairIter(batches()))
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)
    x, y = images(BATCH)
    with pytest.raises(rm.MXNetError, match="a list of 4 batches for 2 devices"):
        mod.forward([DataBatch([x[:5]], [y[:5]])] * 4)
    with pytest.raises(ValueError, match=r"hold \[10\] rows per data input, the module is "
                                         r"bound for \[20\]"):
        mod.forward([DataBatch([x[:5]], [y[:5]])] * 2)


@pytest.mark.filterwarnings("ignore:Parameters already initialized")
def test_det_module_load_with_optimizer_states_continues_the_run(tmp_path):
    want, _ = reference()  # 2 epochs in one go
    first = rm.mod.Module(convnet())
    train(first, batches(), epochs=1)
    prefix = str(tmp_path / "net")
    first.save_checkpoint(prefix, 1, save_optimizer_states=True)
    mod = DetModule.load(prefix, 1, load_optimizer_states=True, data_names=["data"],
                         label_names=["softmax_label"])
    assert mod._preload_opt_states == prefix + "-0001.states"
    data = batches()
    data.reset()  # the second epoch's shuffle
    mod.fit(data, begin_epoch=1, num_epoch=2, **FIT)
    assert mod._preload_opt_states is None  # loaded by init_optimizer (momentum carried on)
    assert_same(mod.get_params()[0], want)


def test_pre_sliced_labels_are_refused_on_workers():
    mod = rm.mod.Module(convnet(), workers=2)  # no actor starts before bind
    mod.binded = True  # as a subclass's own bind would say; nothing is sent anywhere
    x, y = images(BATCH)
    with pytest.raises(NotImplementedError, match=r"update_metric\(pre_sliced=True\) is not "
                                                  "supported on workers"):
        mod.update_metric(rm.metric.create("acc"), [[y[:10]], [y[10:]]], pre_sliced=True)
    with pytest.raises(NotImplementedError, match="list of per-device batches is not supported "
                                                  "on workers"):
        mod.params_initialized = True
        mod.forward([DataBatch([x[:10]], [y[:10]]), DataBatch([x[10:]], [y[10:]])])
