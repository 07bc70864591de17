"""Kuzushiji-MNIST (001 Table 5): IDX files, 000's Table 10 CNN (:func:`labeldp.data.rawformats.idx.idx_image_spec`)."""

from __future__ import annotations

from labeldp.data.rawformats import idx

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = idx.idx_image_spec(
    name="kmnist",
    title="Kuzushiji-MNIST",
    files=idx.idx_files(
        "http://codh.rois.ac.jp/kmnist/dataset/kmnist/",
        (),
        md5={
            "train-images-idx3-ubyte.gz": "bdb82020997e1d708af4cf47b453dcf7",
            "train-labels-idx1-ubyte.gz": "e144d726b3acfaa3e44228e80efcd344",
            "t10k-images-idx3-ubyte.gz": "5c965bf0a639b31b8f53240b1b52f4d7",
            "t10k-labels-idx1-ubyte.gz": "7320c461ea6c1c855c0b718fb2a4b134",
        },
        sha256={
            # train-images: not in the shared mirror, so only torchvision's md5 is known.
            "train-labels-idx1-ubyte.gz": "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
            "t10k-images-idx3-ubyte.gz": "edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5",
            "t10k-labels-idx1-ubyte.gz": "20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c",
        },
        size={
            "train-labels-idx1-ubyte.gz": 29497,
            "t10k-images-idx3-ubyte.gz": 3041136,
            "t10k-labels-idx1-ubyte.gz": 5120,
        },
    ),
    homepage="https://github.com/rois-codh/kmnist",
    license="CC BY-SA 4.0",
    citation="Clanuwat et al. (2018). Deep Learning for Classical Japanese Literature. arXiv:1812.01718.",
    standin_allowed=True,
    notes="The shared mirror lacks train-images-idx3-ubyte.gz; CPU smoke runs use synthetic stand-ins.",
)

read_raw, write_standin = idx.IdxSource(SPEC.name)
