"""Write the model header (TP_MODEL_HEADER) a harness that links an application is built with.

    model_header.py MODEL SCHEME OUT.h

MODEL is a generated model of tests/modelgen.py, SCHEME its training scheme; the blob carries
class names. run.sh calls it for a harness with a "// FUZZ_MODEL: MODEL SCHEME" line, so the
blob is always of the current format.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seed_blob import small_blob
from tinyprop.compile.blob import blob_header

if __name__ == "__main__":
    name, scheme, out = sys.argv[1:4]
    Path(out).write_text(blob_header(small_blob(name, scheme, "float32", True)))
