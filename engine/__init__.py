"""ghostfim's engine: the resident model, prompts, KV reuse, scheduling, post-processing.

OpenMP threads (llama.cpp's CPU backend) spin while they wait by default. When anything else
wants the CPU (an editor, a compiler, another language server), spinning threads starve each
other: measured here on 2 cores with one busy neighbour, a one-token decode took 0.4-3 s
spinning and 66-80 ms passive (45 vs 50 ms on an idle machine). So we ask for passive waiting
unless the user set a policy; it must be set before llama.cpp's libraries load.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
