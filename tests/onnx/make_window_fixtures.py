#!/usr/bin/python3
"""Writes the window-op fixtures tests/onnx/data/win_* (Conv1d, ceil-mode pooling,
ConvTranspose2d with output_padding, F.interpolate) for onnx_window_test. Run from
the repo root with Debian's /usr/bin/python3 (torch 1.13, onnx); the layout of the
files is make_fixtures.py's (NAME.onnx, NAME_in0.npy, NAME_out.npy, NAME_ct.npy,
NAME_din0.npy, NAME_dw_<param>.npy).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from make_fixtures import export


class Interp(nn.Module):
    """F.interpolate after a 1x1 convolution (so that there is a weight)."""

    def __init__(self, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)
        self.kwargs = kwargs

    def forward(self, x):
        return F.interpolate(self.conv(x), **self.kwargs)


class Zoo3d(nn.Module):
    """The 3-D window ops in a row: a strided, dilated, grouped Conv3d with
    asymmetric-looking padding per axis, MaxPool3d (padded, ceil_mode),
    AvgPool3d (count_include_pad=False, padded), ConvTranspose3d with
    output_padding, and a dilated MaxPool3d (composed of slices)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2)
        self.pool = nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), ceil_mode=True)
        self.avg = nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=False)
        self.up = nn.ConvTranspose3d(4, 3, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1), output_padding=(1, 0, 1))
        self.dil = nn.MaxPool3d(2, stride=1, dilation=(1, 2, 1))

    def forward(self, x):
        return self.dil(self.up(self.avg(self.pool(self.conv(x)))))


def main():
    models = [
        ("win_conv1d", nn.Conv1d(2, 3, 3, stride=2, padding=2, dilation=2), (2, 2, 11), 13),
        # squeezenet's pool: 13 -> 6 windows with ceil_mode (floor would give 6 too
        # at 13; 14 gives 7 against floor's 6).
        ("win_maxpool_ceil", nn.Sequential(nn.Conv2d(2, 2, 1), nn.MaxPool2d(3, 2, ceil_mode=True)),
         (2, 2, 14, 14), 13),
        ("win_avgpool_ceil", nn.Sequential(nn.Conv2d(2, 2, 1),
                                           nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)),
         (2, 2, 8, 8), 13),
        ("win_maxpool1d", nn.Sequential(nn.Conv1d(2, 2, 1), nn.MaxPool1d(3, 2, padding=1)), (2, 2, 10), 13),
        ("win_convt", nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), (2, 2, 4, 5), 13),
        ("win_nearest", Interp(scale_factor=2, mode="nearest"), (1, 2, 3, 4), 13),
        ("win_bilinear_ac", Interp(scale_factor=2, mode="bilinear", align_corners=True), (1, 2, 3, 4), 13),
        ("win_bilinear", Interp(size=(5, 7), mode="bilinear", align_corners=False), (1, 2, 3, 4), 13),
        ("win_bicubic", Interp(scale_factor=2, mode="bicubic", align_corners=False), (1, 2, 3, 4), 13),
        ("win_upsample9", Interp(scale_factor=2, mode="nearest"), (1, 2, 3, 4), 9),  # Upsample-9
        ("win_zoo3d", Zoo3d(), (2, 2, 5, 8, 7), 13),
        ("win_avgpool3d_ceil", nn.Sequential(nn.Conv3d(2, 2, 1), nn.AvgPool3d(3, 2, 1, ceil_mode=True)),
         (1, 2, 6, 7, 6), 13),
    ]
    for name, model, shape, opset in models:
        torch.manual_seed(0)
        x = torch.randn(*shape)
        torch.manual_seed(0)
        for p in model.parameters():
            with torch.no_grad():
                p.uniform_(-1, 1)
        export(name, model, [x], opset)


if __name__ == "__main__":
    main()
