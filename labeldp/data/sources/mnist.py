"""MNIST handwritten digits (000 Tables 2, 3, 5, 12; 001 Table 4): IDX files, 000's Table 10 CNN (:func:`labeldp.data.rawformats.idx.idx_image_spec`)."""

from __future__ import annotations

from labeldp.data.rawformats import idx

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = idx.idx_image_spec(
    name="mnist",
    title="MNIST handwritten digits",
    files=idx.idx_files(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        ("http://yann.lecun.com/exdb/mnist/",),
        md5={
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
        sha256={
            "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        },
        size={
            "train-images-idx3-ubyte.gz": 9912422,
            "train-labels-idx1-ubyte.gz": 28881,
            "t10k-images-idx3-ubyte.gz": 1648877,
            "t10k-labels-idx1-ubyte.gz": 4542,
        },
    ),
    homepage="http://yann.lecun.com/exdb/mnist/",
    citation="LeCun, Bottou, Bengio, Haffner (1998). Gradient-based learning applied to document recognition.",
)

read_raw, write_standin = idx.IdxSource(SPEC.name)
