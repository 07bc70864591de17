"""The 1940 US Census (IPUMS USA full count) extract the project asks users to make (paper 003, Section 4.2).

The label, the default feature lists and the step-by-step extract instructions that
:data:`labeldp.data.registry.DATASETS` ``["census1940"]`` carries (the data cannot be downloaded
without an IPUMS account). Kept apart from the registry so the catalogue stays a list of specs;
:mod:`labeldp.data.registry` re-exports every name.
"""

from __future__ import annotations

__all__ = [
    "CENSUS1940_LABEL",
    "CENSUS1940_CATEGORICAL_FEATURES",
    "CENSUS1940_NUMERICAL_FEATURES",
    "CENSUS1940_VARIABLES",
    "CENSUS1940_DEFAULT_FILENAME",
    "CENSUS1940_INSTRUCTIONS",
]

CENSUS1940_LABEL = "WKSWORK1"
# 003 (Section 4.2, Appendix G) and [GKK+23] which it follows do not list their input
# variables in the text available to this project (003 says only "floating point features"
# and "categorical features" with embeddings of dimension 8). This list is the project's
# default, not the paper's; the workflow config can change it. WKSWORK2 (weeks worked in
# intervals) is deliberately absent: it is a coarsened copy of the label.
CENSUS1940_CATEGORICAL_FEATURES = (
    "STATEFIP",
    "URBAN",
    "FARM",
    "OWNERSHP",
    "RELATE",
    "SEX",
    "MARST",
    "RACE",
    "BPL",
    "NATIVITY",
    "CITIZEN",
    "SCHOOL",
    "EDUC",
    "EMPSTAT",
    "LABFORCE",
    "CLASSWKR",
    "OCC1950",
    "IND1950",
)
CENSUS1940_NUMERICAL_FEATURES = ("AGE", "HRSWORK1", "INCWAGE")
CENSUS1940_VARIABLES = (CENSUS1940_LABEL,) + CENSUS1940_CATEGORICAL_FEATURES + CENSUS1940_NUMERICAL_FEATURES
CENSUS1940_DEFAULT_FILENAME = "usa_1940_fullcount.csv.gz"

CENSUS1940_INSTRUCTIONS = f"""\
The 1940 US Census full-count data are distributed by IPUMS USA and need a (free) account;
they cannot be downloaded automatically. To make the extract:

  1. Register at https://usa.ipums.org/ (IPUMS USA) and log in.
  2. Select samples -> "USA FULL COUNT" tab -> tick only "1940 100%" (sample id us1940b);
     untick every default (ACS) sample.
  3. Select variables: the label {CENSUS1940_LABEL} (weeks worked in 1939; 003 predicts 1..52) and the
     features
       categorical: {", ".join(CENSUS1940_CATEGORICAL_FEATURES)}
       numerical:   {", ".join(CENSUS1940_NUMERICAL_FEATURES)}
     (IPUMS adds its technical variables YEAR, SAMPLE, SERIAL, PERNUM, ... automatically;
     keep them). The papers do not name their features; this list is the project default
     and the workflow config can change it (then select those variables instead).
  4. Data format: "Comma delimited (.csv)" (required: the preparation reads CSV only; a
     fixed-width ".dat" extract is refused with the steps to re-export it). Structure: rectangular
     (persons). Keep the file gzip-compressed as IPUMS delivers it.
  5. Submit the extract, wait for the e-mail, download it, and put the file at the
     configured census path (config key census_path; shown below), or point census_path
     at wherever you saved it.

The full count is about 132 million person records (several GB compressed).
"""
