"""Job-type catalogues of the seed systems (the order matters for RNG-exact generators)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from hetsched.errors import SpecError


@dataclass(frozen=True, slots=True)
class JobTemplate:
    """One trainable job type: model string (Gavel vocabulary) and how to launch it."""

    job_type: str
    command: str
    working_directory: str
    num_steps_arg: str
    distributed: bool
    needs_data_dir: bool = True


def _family(model: str, batch_sizes: tuple[int, ...], command: str, workdir: str, steps_arg: str,
            distributed: bool) -> list[JobTemplate]:
    return [JobTemplate(f"{model} (batch size {b})", command.format(b=b), workdir, steps_arg, distributed)
            for b in batch_sizes]


_TRAIN = "python3 -m workloads.train --model {model} --batch-size {{b}} --data-dir %s"

# The 26 templates of Gavel's job table, in its order (docs/rules.md#catalogues). The commands launch
# hetsched's own workloads (workloads/), so the strings differ from the artifact's; `%s` is the data dir.
GAVEL_JOB_TEMPLATES: tuple[JobTemplate, ...] = tuple(
    _family("ResNet-18", (16, 32, 64, 128, 256), _TRAIN.format(model="ResNet-18"),
            "image_classification/cifar10", "--num-steps", True)
    + _family("ResNet-50", (16, 32, 64, 128), _TRAIN.format(model="ResNet-50"),
              "image_classification/imagenet", "--num-steps", True)
    + _family("Transformer", (16, 32, 64, 128, 256),
              _TRAIN.format(model="Transformer"), "translation", "--num-steps", True)
    + _family("LM", (5, 10, 20, 40, 80), _TRAIN.format(model="LM"),
              "language_modeling", "--num-steps", True)
    + _family("Recommendation", (512, 1024, 2048, 4096, 8192),
              _TRAIN.format(model="Recommendation"), "recommendation",
              "--num-steps", False)
    + [JobTemplate("A3C", "python3 -m workloads.train --model A3C", "rl", "--num-steps", False,
                   needs_data_dir=False),
       JobTemplate("CycleGAN", "python3 -m workloads.train --model CycleGAN --data-dir %s", "cyclegan", "--num-steps",
                   False)]
)

GAVEL_JOB_TYPES: frozenset[str] = frozenset(t.job_type for t in GAVEL_JOB_TEMPLATES)

#: Synergy's model zoo (docs/rules.md#catalogues): name -> task class.
SYNERGY_MODELS: dict[str, str] = {
    "alexnet": "image", "res18": "image", "res50": "image", "mobilenet": "image", "shufflenet": "image",
    "gnmt": "language", "transformer": "language", "lstm": "language",
    "m5": "speech", "deepspeech": "speech",
}

#: Synergy's models as runtime jobs: each trains the closest of hetsched's workloads (aliases in
#: workloads/models.py), on synthetic data.
SYNERGY_JOB_TEMPLATES: tuple[JobTemplate, ...] = tuple(
    JobTemplate(m, f"python3 -m workloads.train --model {m}", task, "--num-steps", True, needs_data_dir=False)
    for m, task in SYNERGY_MODELS.items())

_BATCH = re.compile(r"^(?P<model>.+?) \(batch size (?P<bs>\d+)\)$")


@functools.lru_cache(maxsize=4096)
def split_job_type(job_type: str) -> tuple[str, int | None]:
    """`'ResNet-50 (batch size 64)'` -> `('ResNet-50', 64)`; types without a batch size give `None`. Cached:
    the planner asks for every running job in every round."""
    m = _BATCH.match(job_type)
    if m is None:
        return job_type, None
    return m.group("model"), int(m.group("bs"))


def template_for(job_type: str) -> JobTemplate:
    """The template of a job type (Gavel's, or a Synergy model's)."""
    for t in GAVEL_JOB_TEMPLATES + SYNERGY_JOB_TEMPLATES:
        if t.job_type == job_type:
            return t
    raise SpecError(f"unknown job type {job_type!r}; Gavel's types are e.g. 'ResNet-18 (batch size 64)', 'A3C'; "
                    f"Synergy's models: {', '.join(SYNERGY_MODELS)}")
