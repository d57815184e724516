"""bench.procstat, bench.machine and bench.logscan parsers."""

from __future__ import annotations

import os

from bench.logscan import parse_log_line, shape, summarize_log
from bench.machine import parse_cpu_model, parse_meminfo_kib
from bench.procstat import flag_value, parse_schedstat, parse_stat_cpu_ticks, parse_status_kib, sample

STAT = ("4242 (python -m (weird) x) S 1 4242 4242 0 -1 4194560 23587 0 0 0 "
        "1234 567 0 0 20 0 3 0 123456 1000000 25000 18446744073709551615")


def test_stat_cpu_ticks_with_parens_in_comm() -> None:
    assert parse_stat_cpu_ticks(STAT) == (1234, 567)


def test_status_kib() -> None:
    status = "Name:\tpython\nVmPeak:\t  300000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t   99999 kB\n"
    assert parse_status_kib(status, "VmHWM") == 123456
    assert parse_status_kib(status, "VmRSS") == 99999
    assert parse_status_kib(status, "VmSwap") is None


def test_sample_of_this_process() -> None:
    s = sample(os.getpid())
    assert s is not None and s.cpu_seconds > 0 and (s.hwm_kib or 0) >= (s.rss_kib or 0) > 0


def test_schedstat() -> None:
    assert parse_schedstat("1500000000 250000000 42\n") == (1.5, 0.25)


def test_flag_value_last_wins() -> None:
    argv = ["kcm", "--kube-api-qps=5000", "--leader-elect=false", "--kube-api-qps=100", "--controllers", "*"]
    assert flag_value(argv, "kube-api-qps") == "100"
    assert flag_value(argv, "controllers") == "*"
    assert flag_value(argv, "missing") is None


def test_machine_parsers() -> None:
    assert parse_cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert parse_meminfo_kib("MemTotal:       24576000 kB\nMemFree: 1 kB\n") == 24576000


def test_log_scan_json_and_text() -> None:
    text = "\n".join([
        '{"ts": "x", "level": "warning", "logger": "kruntime.workqueue", "msg": "mirror: bench/job-00012 failed '
        '(attempt 1, retry in 0.05s): worker-2"}',
        '{"ts": "x", "level": "warning", "logger": "kruntime.workqueue", "msg": "mirror: bench/job-00013 failed '
        '(attempt 2, retry in 0.10s): worker-2"}',
        '{"ts": "x", "level": "info", "logger": "mirror", "msg": "ok"}',
        "2026-05-01 10:00:00,000 ERROR builtin_controller: boom 3",
        "",
    ])
    s = summarize_log(text)
    assert s["byLevel"] == {"WARNING": 2, "INFO": 1, "ERROR": 1}
    assert s["topProblems"][0]["count"] == 2
    assert parse_log_line("2026-05-01 10:00:00,000 WARN x: y") == ("WARNING", "x: y")
    assert shape("job 12 uid 0f8fad5b-d9cb-469f-a165-70867728950e") == "job N uid <uid>"
