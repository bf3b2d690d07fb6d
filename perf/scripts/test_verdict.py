"""pytest perf/scripts/test_verdict.py: the one rule that says what limited a run (summarize.verdict,
issue 27 point 2), at and around each documented threshold, and the line every summary.md ends with."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402
from summarize import verdict  # noqa: E402


def cpu(**pct):
    return {k + "_pct": v for k, v in pct.items()}


def test_no_cpu_figures_is_unknown():
    assert verdict(None)[0] == "unknown"


def test_local_jmeter_near_its_cores_is_the_load_generator():
    assert verdict(cpu(machine_busy=92, jmeter=summarize.LOADGEN_PCT, cache=1))[0] == "load generator saturated"
    assert verdict(cpu(machine_busy=92, jmeter=summarize.LOADGEN_PCT - 1, cache=1))[0] == "none"


def test_busy_machine_counts_against_the_load_generator_that_runs_on_it():
    # 180 threads here: JMeter 45 %, the cache 16 %, the machine 96 % busy -> JMeter got no more CPU
    kind, text = verdict(cpu(machine_busy=96, jmeter=45, cache=16, registry=1))
    assert kind == "load generator saturated" and "96%" in text
    assert verdict(cpu(machine_busy=94, jmeter=45, cache=16, registry=1))[0] == "none"


def test_engines_on_this_machine_add_up_with_the_controller():
    engines = [{"engine": "127.0.0.1:1099", "local": True, "cpu_pct": 50.0},
               {"engine": "127.0.0.1:1101", "local": True, "cpu_pct": 38.0}]
    assert verdict(cpu(machine_busy=93, jmeter=2, cache=3), engines)[0] == "load generator saturated"
    engines[1]["cpu_pct"] = 30.0
    assert verdict(cpu(machine_busy=93, jmeter=2, cache=3), engines)[0] == "none"


def test_remote_engines_free_this_machine_but_one_hot_engine_is_saturated():
    remote = [{"engine": "10.0.0.5:1099", "local": False, "cpu_pct": None}]
    # the machine is busy, but with the load generator elsewhere that is the target's doing
    kind, text = verdict(cpu(machine_busy=97, jmeter=1, cache=summarize.TARGET_PCT), remote)
    assert kind == "target saturated"
    assert verdict(cpu(machine_busy=97, jmeter=1, cache=50), remote)[0] == "none"
    assert "not recorded" in verdict(cpu(machine_busy=97, jmeter=1, cache=50), remote)[1]
    remote[0]["cpu_pct"] = 91.0
    assert verdict(cpu(machine_busy=50, jmeter=1, cache=50), remote)[0] == "load generator saturated"


def test_target_then_upstream():
    assert verdict(cpu(machine_busy=90, jmeter=2, cache=85, registry=85), [{"engine": "h:1", "local": False}])[0] \
        == "target saturated"
    assert verdict(cpu(machine_busy=90, jmeter=2, cache=5, registry=85), [{"engine": "h:1", "local": False}])[0] \
        == "upstream saturated"
    # registry:2 straight (no cache figure): registry:2 is the target
    assert verdict(cpu(machine_busy=90, jmeter=2, registry=86), [{"engine": "h:1", "local": False}])[0] \
        == "target saturated"


def test_network_disk_from_iowait_or_cut_connections():
    assert verdict(cpu(machine_busy=40, jmeter=10, cache=10, iowait=summarize.IOWAIT_PCT))[0] == "network/disk"
    errs = {"error_pct": 2.0, "error_reasons": {"connection reset": 3, "HTTP 404": 1}}
    assert verdict(cpu(machine_busy=40, jmeter=10, cache=10), errors=errs)[0] == "network/disk"
    errs = {"error_pct": 2.0, "error_reasons": {"HTTP 404": 4}}
    assert verdict(cpu(machine_busy=40, jmeter=10, cache=10), errors=errs)[0] == "none"


def test_summary_md_ends_with_the_verdict(tmp_path):
    (tmp_path / "results.csv").write_text(
        "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes\n"
        "1000,50,manifest,200,OK,127.0.0.1:1099-pullers 1-1,text,true,,100\n")
    (tmp_path / "cpu.env").write_text("wall_s=10\ncores=2\nmachine_busy_s=19.5\njmeter_s=4\nengines_s=6\ncache_s=3\n")
    (tmp_path / "engines").mkdir()
    (tmp_path / "engines" / "engines.tsv").write_text(
        "engine\tlocal\tpid\tcpu_s\tcpu_pct\trss_max_mib\trss_end_mib\n127.0.0.1:1099\tyes\t1\t6\t30\t300\t290\n")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(summarize.__file__), "summarize.py"), str(tmp_path),
                    "--cpu", str(tmp_path / "cpu.env")], check=True, capture_output=True)
    md = (tmp_path / "summary.md").read_text().rstrip("\n").splitlines()
    assert md[-1].startswith("Verdict: load generator saturated - ")
    engines = next(line for line in md if line.startswith("JMeter remote engines (1;"))
    # the engine's share of the samples, from the host:port JMeter puts before its thread names
    assert "127.0.0.1:1099 (this machine): 0 images (0 failed), 1 requests; CPU 6.0 core-s (30.0%)" in engines
    # the engines' CPU (run.sh writes engines_s) is theirs, not "everything else": 19.5 - 4 - 3 - 6
    assert "everything else 6.5" in "\n".join(md)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
