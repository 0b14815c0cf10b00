"""Traces: readers and writers of the seed systems' formats, and the job-stream generators."""

from hetsched.traces.formats import FORMATS, infer_format, read_trace, write_trace
from hetsched.traces.generators import GENERATORS, GavelGenerator, make_generator

__all__ = ["FORMATS", "GENERATORS", "GavelGenerator", "infer_format", "make_generator", "read_trace",
           "write_trace"]
