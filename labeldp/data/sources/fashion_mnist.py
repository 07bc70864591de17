"""Fashion-MNIST (000 Tables 6, 14; 001 Table 4): IDX files, 000's Table 10 CNN (:func:`labeldp.data.rawformats.idx.idx_image_spec`)."""

from __future__ import annotations

from labeldp.data.rawformats import idx

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = idx.idx_image_spec(
    name="fashion_mnist",
    title="Fashion-MNIST (Zalando)",
    files=idx.idx_files(
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        (),
        md5={
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
        sha256={
            "train-images-idx3-ubyte.gz": "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "train-labels-idx1-ubyte.gz": "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "t10k-images-idx3-ubyte.gz": "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "t10k-labels-idx1-ubyte.gz": "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        },
        size={
            "train-images-idx3-ubyte.gz": 26421880,
            "train-labels-idx1-ubyte.gz": 29515,
            "t10k-images-idx3-ubyte.gz": 4422102,
            "t10k-labels-idx1-ubyte.gz": 5148,
        },
    ),
    homepage="https://github.com/zalandoresearch/fashion-mnist",
    license="MIT",
    citation="Xiao, Rasul, Vollgraf (2017). Fashion-MNIST. arXiv:1708.07747.",
)

read_raw, write_standin = idx.IdxSource(SPEC.name)
