"""A user module from the MXNet 1.x era: ``Module(BaseModule)`` written against MXNet's
private module helpers, with only MXNet's import paths. test_module_paths.py loads it with
the compatibility layer installed and trains it beside the stock ``mx.mod.Module``.

It keeps MXNet's three flags as plain assignments, builds its own DataParallelExecutorGroup
and drives the kvstore through ``mxnet.model``'s helpers, as such modules did.
"""
import logging

from mxnet import context as ctx
from mxnet import ndarray as nd
from mxnet import optimizer as opt
from mxnet.initializer import InitDesc, Uniform
from mxnet.model import (_create_kvstore, _initialize_kvstore, _update_params,
                         _update_params_on_kvstore, load_checkpoint)
from mxnet.module.base_module import BaseModule, _check_input_names, _parse_data_desc
from mxnet.module.executor_group import DataParallelExecutorGroup


class OldModule(BaseModule):
    """One symbol on one or more contexts of this process, the MXNet 1.x way."""

    def __init__(self, symbol, data_names=("data",), label_names=("softmax_label",),
                 logger=logging, context=ctx.cpu(), fixed_param_names=None):
        super(OldModule, self).__init__(logger=logger)
        self._context = [context] if isinstance(context, ctx.Context) else list(context)
        self._work_load_list = [1] * len(self._context)
        self._symbol = symbol
        self._data_names = list(data_names)
        self._label_names = list(label_names or [])
        self._fixed_param_names = list(fixed_param_names or [])
        _check_input_names(symbol, self._data_names, "data", True)
        _check_input_names(symbol, self._label_names, "label", False)
        _check_input_names(symbol, self._fixed_param_names, "fixed_param", True)
        inputs = self._data_names + self._label_names
        self._param_names = [n for n in symbol.list_arguments() if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._arg_params = self._aux_params = None
        self._params_dirty = False
        self._optimizer = self._kvstore = self._updater = None
        self._update_on_kvstore = None
        self._exec_group = None
        self._data_shapes = self._label_shapes = None

    @staticmethod
    def load(prefix, epoch, **kwargs):
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = OldModule(symbol=sym, **kwargs)
        mod._arg_params, mod._aux_params = args, auxs
        mod.params_initialized = True
        return mod

    def save_checkpoint(self, prefix, epoch):
        self._symbol.save("%s-symbol.json" % prefix)
        self.save_params("%s-%04d.params" % (prefix, epoch))

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
        return self._data_shapes

    @property
    def label_shapes(self):
        return self._label_shapes

    @property
    def output_shapes(self):
        return self._exec_group.get_output_shapes()

    def get_params(self):
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return

        def fill(desc, arr, given):
            if given is not None and desc in given:
                given[desc].copyto(arr)
            elif given is not None and not allow_missing:
                raise RuntimeError("%s is not presented" % desc)
            elif initializer is not None:
                initializer(desc, arr)

        attrs = self._symbol.attr_dict()
        for name, arr in self._arg_params.items():
            fill(InitDesc(name, attrs.get(name, None)), arr, arg_params)
        for name, arr in self._aux_params.items():
            fill(InitDesc(name, attrs.get(name, None)), arr, aux_params)
        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params,
                                    allow_extra=allow_extra)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if force_rebind:
            self.binded = False
            self._exec_group = None
        if self.binded:
            return
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad, None,
            logger=self.logger, fixed_param_names=self._fixed_param_names, grad_req=grad_req)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if self.params_initialized:  # loaded or rebound: copy the known values in
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            self._arg_params = {name: nd.zeros(arrs[0].shape, dtype=arrs[0].dtype)
                                for name, arrs in zip(self._param_names,
                                                      self._exec_group.param_arrays)}
            self._aux_params = {name: nd.zeros(arrs[0].shape, dtype=arrs[0].dtype)
                                for name, arrs in zip(self._aux_names,
                                                      self._exec_group.aux_arrays)}

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        if self.optimizer_initialized and not force_init:
            return
        if self._params_dirty:
            self._sync_params_from_devices()
        kvstore, update_on_kvstore = _create_kvstore(kvstore, len(self._context),
                                                     self._arg_params)
        batch_size = self._exec_group.batch_size
        if kvstore and "dist" in kvstore.type and "_sync" in kvstore.type:
            batch_size *= kvstore.num_workers
        if isinstance(optimizer, str):
            # one optimizer index per device copy when the devices update themselves
            idx2name = {}
            if update_on_kvstore:
                idx2name.update(enumerate(self._exec_group.param_names))
            else:
                for k in range(len(self._context)):
                    idx2name.update({i * len(self._context) + k: n
                                     for i, n in enumerate(self._exec_group.param_names)})
            optimizer_params = dict(optimizer_params)
            optimizer_params.setdefault("rescale_grad", 1.0 / batch_size)
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name,
                                   **optimizer_params)
        self._optimizer, self._kvstore = optimizer, kvstore
        self._update_on_kvstore, self._updater = update_on_kvstore, None
        if kvstore:
            _initialize_kvstore(kvstore=kvstore, param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params, param_names=self._param_names,
                                update_on_kvstore=update_on_kvstore)
        if update_on_kvstore:
            kvstore.set_optimizer(self._optimizer)
        else:
            self._updater = opt.get_updater(optimizer)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._exec_group.param_arrays,
                                      self._exec_group.grad_arrays, self._kvstore,
                                      self._exec_group.param_names)
        else:
            _update_params(self._exec_group.param_arrays, self._exec_group.grad_arrays,
                           updater=self._updater, num_device=len(self._context),
                           kvstore=self._kvstore, param_names=self._exec_group.param_names)

    def get_outputs(self, merge_multi_context=True):
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def _sync_params_from_devices(self):
        self._exec_group.get_params(self._arg_params, self._aux_params)
        self._params_dirty = False

    def install_monitor(self, mon):
        self._exec_group.install_monitor(mon)
