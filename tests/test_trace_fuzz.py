"""Any byte string gives either jobs or a TraceError from every reader, never another exception."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched import Job, TraceError
from hetsched.traces.canonical import parse_canonical_csv
from hetsched.traces.gavel_tsv import parse_gavel_trace
from hetsched.traces.shockwave_tsv import parse_shockwave_trace
from hetsched.traces.formats import FORMATS
from hetsched.traces.synergy_csv import parse_synergy_csv

PRODUCTION = ("helios", "acme", "openb", "alibaba2026", "pai2020", "philly")
PARSERS = (parse_gavel_trace, parse_shockwave_trace, parse_synergy_csv, parse_canonical_csv,
           *(FORMATS[name].parse for name in PRODUCTION))

# Bytes biased toward almost-valid lines: real field values, separators and junk.
TOKENS = st.sampled_from([b"\t", b"\n", b",", b"\r\n", b"1", b"-1", b"0", b"3.5", b"nan", b"inf", b"1e400",
                          b"A3C", b"ResNet-18 (batch size 64)", b"alexnet", b"gns", b"static", b"\xff", b"\"",
                          b"job_id,arrival_time_s,job_type,scale_factor,total_steps\n", b"-", b" ", b"\x00",
                          b"gpu_num,submit_time,duration,user,vc,state\n", b"2020-04-01 00:00:00", b"2020-13-01 00:00:00",
                          b"name,num_gpu,creation_time,deletion_time,scheduled_time,gpu_spec\n", b"T4|V100M16",
                          b"job_name,gpu_request,worker_num,submit_time,duration,organization\n", b"MISC", b"1e308",
                          b"j1,worker,2,Terminated,1000,4600,600,29.3,50,V100\n", b"[", b"{", b"]"])
FUZZ = st.one_of(st.binary(max_size=400), st.lists(TOKENS, max_size=60).map(b"".join))


def check(parser, data: bytes) -> None:
    try:
        jobs = parser(data, source="fuzz")
    except TraceError as exc:
        assert str(exc).startswith("fuzz")
        return
    assert isinstance(jobs, list) and all(isinstance(j, Job) for j in jobs)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=FUZZ, which=st.integers(min_value=0, max_value=len(PARSERS) - 1))
def test_readers_never_raise_anything_but_trace_error(data, which):
    check(PARSERS[which], data)


def test_fuzz_corpus_reaches_valid_jobs():
    """The biased corpus can produce real jobs, so the fuzz covers the accepting path too."""
    line = b"A3C\tc\tw\t--s\t1\t1\t1\t1\t-1\t0\n"
    assert len(parse_gavel_trace(line * 3)) == 3
    assert len(parse_canonical_csv(b"job_id,arrival_time_s,job_type,scale_factor,total_steps\n0,1,A3C,1,5\n")) == 1
    assert len(FORMATS["helios"].parse(b"gpu_num,submit_time,duration,user,vc,state\n1,2020-04-01 00:00:00,60,u,v,x\n"
                                       * 1)) == 1
    assert len(FORMATS["pai2020"].parse(b"j1,worker,2,Terminated,1000,4600,600,29.3,50,V100\n")) == 1
