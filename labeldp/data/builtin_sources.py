"""The specs of the datasets this suite ships (MNIST, FashionMNIST, KMNIST, CIFAR-10, the Criteo
sets, Census 1940, RAND HIE): where every raw file comes from and how it is checked.

Checksums
---------
* MNIST, Fashion-MNIST, KMNIST: md5 values are torchvision's
  (``pytorch/vision`` ``torchvision/datasets/mnist.py``, ``resources`` lists). Where a
  verified copy of the official file is in the project's shared mirror, its sha256 is
  pinned too (see ``shared/data/SOURCES.md``; every one of those files has the official md5).
* CIFAR-10: torchvision's ``tgz_md5`` for ``cifar-10-python.tar.gz`` and the md5 of every
  member inside the archive (``torchvision/datasets/cifar.py``).
* Criteo Attribution and Criteo Sponsored Search: no published checksum. The sha256 is
  recorded on first download in a ``<file>.sha256`` sidecar and checked from then on; pin
  it in the workflow config (``pinned_sha256``) to make the check independent of the sidecar.
* Census 1940: a user-made IPUMS extract; it cannot be downloaded without an account, so
  the spec carries instructions instead of URLs (see :data:`CENSUS1940_INSTRUCTIONS`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .census1940_extract import CENSUS1940_INSTRUCTIONS, CENSUS1940_LABEL
from .dataset_spec import DatasetSpec, RemoteFile

__all__ = ["BUILTIN_DATASETS"]


# --------------------------------------------------------------------------- MNIST family

_IDX_NAMES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _idx_files(
    primary: str,
    fallbacks: tuple[str, ...],
    md5: Mapping[str, str],
    sha256: Mapping[str, str],
    size: Mapping[str, int],
) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(
            filename=name,
            url=primary + name,
            md5=md5[name],
            sha256=sha256.get(name),
            mirrors=tuple(base + name for base in fallbacks),
            size=size.get(name),
        )
        for name in _IDX_NAMES
    )


_MNIST = DatasetSpec(
    name="mnist",
    title="MNIST handwritten digits",
    files=_idx_files(
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
    kind="image",
    model="mnist_cnn",
    raw_format="idx",
    num_classes=10,
    input_shape=(28, 28, 1),
    train_examples=60000,
    homepage="http://yann.lecun.com/exdb/mnist/",
    citation="LeCun, Bottou, Bengio, Haffner (1998). Gradient-based learning applied to document recognition.",
)

_FASHION_MNIST = DatasetSpec(
    name="fashion_mnist",
    title="Fashion-MNIST (Zalando)",
    files=_idx_files(
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
    kind="image",
    model="mnist_cnn",
    raw_format="idx",
    num_classes=10,
    input_shape=(28, 28, 1),
    train_examples=60000,
    homepage="https://github.com/zalandoresearch/fashion-mnist",
    license="MIT",
    citation="Xiao, Rasul, Vollgraf (2017). Fashion-MNIST. arXiv:1708.07747.",
)

_KMNIST = DatasetSpec(
    name="kmnist",
    title="Kuzushiji-MNIST",
    files=_idx_files(
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
    kind="image",
    model="mnist_cnn",
    raw_format="idx",
    num_classes=10,
    input_shape=(28, 28, 1),
    train_examples=60000,
    homepage="https://github.com/rois-codh/kmnist",
    license="CC BY-SA 4.0",
    citation="Clanuwat et al. (2018). Deep Learning for Classical Japanese Literature. arXiv:1812.01718.",
    standin_allowed=True,
    notes="The shared mirror lacks train-images-idx3-ubyte.gz; CPU smoke runs use synthetic stand-ins.",
)

# ------------------------------------------------------------------------------ CIFAR-10

_CIFAR10 = DatasetSpec(
    name="cifar10",
    title="CIFAR-10 (python version)",
    files=(
        RemoteFile(
            filename="cifar-10-python.tar.gz",
            url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            md5="c58f30108f718f92721af3b95e74349a",
            size=170498071,
        ),
    ),
    kind="image",
    model="cifar_cnn",
    raw_format="cifar10_python",
    num_classes=10,
    input_shape=(32, 32, 3),
    train_examples=50000,
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    citation="Krizhevsky (2009). Learning Multiple Layers of Features from Tiny Images.",
    standin_allowed=True,
    members=MappingProxyType(
        {
            "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
            "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
            "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
            "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
            "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
            "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
            "cifar-10-batches-py/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
        }
    ),
    notes="Not in the shared mirror; CPU smoke runs use synthetic stand-ins.",
)

# -------------------------------------------------------------------------------- Criteo

_CRITEO_ATTRIBUTION = DatasetSpec(
    name="criteo_attribution",
    title="Criteo Attribution Modeling for Bidding",
    files=(
        RemoteFile(
            filename="criteo-research-attribution-dataset.zip",
            url="http://go.criteo.net/criteo-research-attribution-dataset.zip",
        ),
    ),
    kind="tabular",
    raw_format="criteo_attribution_zip",
    num_classes=2,
    input_shape=None,
    homepage="https://ailab.criteo.com/criteo-attribution-modeling-bidding-dataset/",
    license="CC BY-NC-SA 4.0",
    citation=(
        "Diemert, Meynet, Galland, Lefortier (2017). Attribution Modeling Increases Efficiency "
        "of Bidding in Display Advertising. AdKDD & TargetAd workshop, KDD."
    ),
    label="last_touch_attribution_conversion",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The zip holds criteo_attribution_dataset.tsv.gz. "
        "Some users report the go.criteo.net link answering 404; the same data is on Hugging Face "
        "(https://huggingface.co/datasets/criteo/criteo-attribution-dataset, login and terms "
        "acceptance required): download it by hand and place the zip in the mirror directory "
        "as <mirror>/criteo_attribution/criteo-research-attribution-dataset.zip."
    ),
)

_CRITEO_SEARCH = DatasetSpec(
    name="criteo_search",
    title="Criteo Sponsored Search Conversion Log",
    files=(
        RemoteFile(
            filename="criteo-research-search-conversion.tar.gz",
            url="http://go.criteo.net/criteo-research-search-conversion.tar.gz",
        ),
    ),
    kind="tabular",
    raw_format="criteo_search_targz",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://ailab.criteo.com/criteo-sponsored-search-conversion-log-dataset/",
    license="CC BY-NC-SA 4.0",
    citation=(
        "Tallis, Yadav (2018). Reacting to Variations in Product Demand: An Application for "
        "Conversion Rate (CR) Prediction in Sponsored Search. arXiv:1806.08211."
    ),
    label="SalesAmountInEuro",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The archive holds the tab-separated file CriteoSearchData."
    ),
)

_CRITEO_PCTR = DatasetSpec(
    name="criteo_pctr",
    title="Criteo Display Advertising Challenge (Kaggle 2014; 002's Criteo pCTR data)",
    files=(
        RemoteFile(
            filename="criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz",
            url="https://go.criteo.net/criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz",
        ),
    ),
    kind="tabular",
    raw_format="criteo_dac_targz",
    num_classes=2,
    input_shape=None,
    homepage="https://ailab.criteo.com/ressources/",
    license="Criteo terms for research use (see the archive's readme.txt and the Criteo AI Lab page)",
    citation=(
        "Jean-Baptiste Tien, Olivier Chapelle, joycenv (2014). Display Advertising Challenge. Kaggle. "
        "https://kaggle.com/competitions/criteo-display-ad-challenge"
    ),
    label="click",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The archive (~4.3 GB) holds train.txt (45,840,617 labelled lines), "
        "test.txt (unlabelled, unused) and readme.txt; older copies are named dac.tar.gz (same archive: "
        "rename it). Preparation streams the archive; the full file needs ~9 GB of memory."
    ),
)

# --------------------------------------------------------------------------- Census 1940

# The label, default features and extract instructions live in census1940_extract.py.

_CENSUS1940 = DatasetSpec(
    name="census1940",
    title="1940 US Census, IPUMS USA full count (us1940b)",
    files=(),
    kind="tabular",
    raw_format="ipums_extract",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://usa.ipums.org/",
    license="IPUMS USA terms of use (no redistribution)",
    citation=(
        "Ruggles et al., IPUMS USA; Minnesota Population Center and Ancestry.com, "
        "IPUMS Restricted Complete Count Data / 1940 100% database."
    ),
    label=CENSUS1940_LABEL,
    manual=True,
    manual_instructions=CENSUS1940_INSTRUCTIONS,
    standin_allowed=True,
)

# ------------------------------------------------------------------- RAND HIE (stand-in)

_RAND_HIE = DatasetSpec(
    name="rand_hie",
    title="RAND Health Insurance Experiment (statsmodels copy; a real stand-in for 003's data)",
    files=(),
    kind="tabular",
    raw_format="statsmodels_package",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://www.statsmodels.org/stable/datasets/generated/randhie.html",
    license="public domain (statsmodels: 'This is in the public domain.')",
    citation="Cameron, Trivedi (2005). Microeconometrics: Methods and Applications. RAND HIE data.",
    label="mdvis",
    notes=(
        "Shipped inside the statsmodels wheel (no download); copied out and sha256-checked by "
        "labeldp.data.rand_hie. A stand-in for 003's data sets, never reported as them."
    ),
)


BUILTIN_DATASETS: Mapping[str, DatasetSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _MNIST,
            _FASHION_MNIST,
            _KMNIST,
            _CIFAR10,
            _CRITEO_ATTRIBUTION,
            _CRITEO_SEARCH,
            _CRITEO_PCTR,
            _CENSUS1940,
            _RAND_HIE,
        )
    }
)
