"""A Faster R-CNN-style training step whose proposal-target layer is a Python CustomOp trains
to the same parameters in process and on 2 Ray workers (the op class travels with the symbol).
"""
import numpy as np
import pytest

import raymod as rm

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

ROIS_PER_IMAGE = 4
NUM_CLASSES = 3


def _iou(boxes, gt):
    """IoU of every box (R, 4) with every ground-truth box (G, 4), corners inclusive."""
    x1 = np.maximum(boxes[:, None, 0], gt[None, :, 0])
    y1 = np.maximum(boxes[:, None, 1], gt[None, :, 1])
    x2 = np.minimum(boxes[:, None, 2], gt[None, :, 2])
    y2 = np.minimum(boxes[:, None, 3], gt[None, :, 3])
    inter = np.clip(x2 - x1 + 1, 0, None) * np.clip(y2 - y1 + 1, 0, None)
    area = lambda b: (b[..., 2] - b[..., 0] + 1) * (b[..., 3] - b[..., 1] + 1)  # noqa: E731
    return inter / (area(boxes)[:, None] + area(gt)[None, :] - inter)


class ProposalTarget(rm.operator.CustomOp):
    """The first ROIS_PER_IMAGE proposals of each image (MultiProposal sorts them by score),
    labelled with the class of the best-overlapping ground truth, background below 0.3 IoU.
    Deterministic, so that the step does not depend on how the batch is sliced."""

    def forward(self, is_train, req, in_data, out_data, aux):
        rois, gt = np.asarray(in_data[0]), np.asarray(in_data[1])
        keep, labels = [], []
        for image in range(gt.shape[0]):
            mine = rois[rois[:, 0] == image][:ROIS_PER_IMAGE]
            overlap = _iou(mine[:, 1:], gt[image, :, :4])
            best = overlap.argmax(axis=1)
            label = np.where(overlap.max(axis=1) >= 0.3, gt[image, best, 4], 0)
            keep.append(mine)
            labels.append(label)
        self.assign(out_data[0], req[0], np.concatenate(keep))
        self.assign(out_data[1], req[1], np.concatenate(labels))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        for i, grad in enumerate(in_grad):
            self.assign(grad, req[i], 0)


@rm.operator.register("test_proposal_target")
class ProposalTargetProp(rm.operator.CustomOpProp):
    def __init__(self, rois_per_image="4"):
        super().__init__(need_top_grad=False)
        self.rois_per_image = int(rois_per_image)

    def list_arguments(self):
        return ["rois", "gt_boxes"]

    def list_outputs(self):
        return ["rois_output", "label"]

    def infer_shape(self, in_shape):
        n = in_shape[1][0] * self.rois_per_image
        return in_shape, [[n, 5], [n]], []

    def create_operator(self, ctx, shapes, dtypes):
        return ProposalTarget()


def rcnn():
    data, im_info = rm.sym.Variable("data"), rm.sym.Variable("im_info")
    gt_boxes = rm.sym.Variable("gt_boxes")
    feat = rm.sym.Activation(rm.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8,
                                                name="conv1"), act_type="relu")
    feat = rm.sym.Pooling(feat, kernel=(4, 4), stride=(4, 4), pool_type="max")
    rpn_cls = rm.sym.Convolution(feat, kernel=(1, 1), num_filter=2, name="rpn_cls")
    rpn_bbox = rm.sym.Convolution(feat, kernel=(1, 1), num_filter=4, name="rpn_bbox")
    cls_prob = rm.sym.Reshape(rm.sym.SoftmaxActivation(
        rm.sym.Reshape(rpn_cls, shape=(0, 2, -1, 0)), mode="channel"), shape=(0, 2, -1, 0))
    rois = rm.sym.contrib.MultiProposal(cls_prob, rpn_bbox, im_info, feature_stride=4,
                                        scales=(2,), ratios=(1,), rpn_pre_nms_top_n=40,
                                        rpn_post_nms_top_n=ROIS_PER_IMAGE, threshold=0.7,
                                        rpn_min_size=1)
    target = rm.sym.Custom(rois, gt_boxes, op_type="test_proposal_target",
                           rois_per_image=ROIS_PER_IMAGE, name="proposal_target")
    pooled = rm.sym.ROIPooling(feat, target[0], pooled_size=(2, 2), spatial_scale=0.25)
    score = rm.sym.FullyConnected(rm.sym.Flatten(pooled), num_hidden=NUM_CLASSES, name="cls")
    return rm.sym.SoftmaxOutput(score, rm.sym.BlockGrad(target[1]), name="cls_prob")


def batches(n=6, seed=3):
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
    im_info = np.tile(np.array([[32, 32, 1]], np.float32), (n, 1))
    corner = rng.integers(0, 16, size=(n, 2, 2))
    gt = np.concatenate([corner, corner + 12, rng.integers(1, NUM_CLASSES, size=(n, 2, 1))],
                        axis=2).astype(np.float32)
    return rm.io.NDArrayIter({"data": images, "im_info": im_info}, {"gt_boxes": gt},
                             batch_size=2)


def train(workers, close):
    rm.random.seed(5)
    mod = rm.mod.Module(rcnn(), data_names=["data", "im_info"], label_names=["gt_boxes"],
                        workers=workers)
    if workers:
        close(mod)
    mod.fit(batches(), num_epoch=1, initializer=rm.init.Xavier(), eval_metric="loss",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9})
    return {k: v.copy() for k, v in mod.get_params()[0].items()}


def test_rcnn_step_with_custom_proposal_target_matches_on_workers(close_modules):
    local = train(None, close_modules)
    remote = train(2, close_modules)
    assert set(local) == set(remote)
    for name in local:
        np.testing.assert_allclose(remote[name], local[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
