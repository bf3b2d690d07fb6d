"""pytest perf/scripts/test_verdict.py: the one rule that says what limited a run (summarize.verdict):
it decides from each process's share of the machine - JMeter, the target (whatever it is), the
upstream, everything else - on recorded runs (fixtures/verdict/) and around each documented threshold,
and every summary.md ends with its line."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402
from summarize import verdict  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures", "verdict")


def cpu(tname="registry-cache", uname="registry:2", **pct):
    """read_cpu()'s shape: shares in % (machine_busy, jmeter, target, upstream, other, ...) and the names."""
    c = {k + "_pct": v for k, v in pct.items()}
    c.update(target=tname, upstream=uname)
    return c


def recorded(name):
    return summarize.read_cpu(os.path.join(FIXTURES, name, "cpu.env"))


# ---- recorded runs
def test_recorded_jmeter_bound_run():
    c = recorded("jmeter-bound")   # an older cpu.env: cache_s and registry_s read as target and upstream
    assert c["target"] == "registry-cache" and round(c["target_pct"]) == 17 and round(c["jmeter_pct"]) == 64
    kind, text = verdict(c)
    assert kind == "load generator saturated"
    assert "largest share went to JMeter" in text and "JMeter 64%" in text


def test_recorded_run_bound_by_other_processes():
    c = recorded("other-bound")
    kind, text = verdict(c)
    # the machine was full, but not of JMeter: the old rule called this "load generator saturated"
    assert kind == "other processes" and "other processes 82%" in text and "JMeter 17%" in text


def test_recorded_url_target_is_measured_as_the_target():
    # a --url target: run.sh found the process on its port; other processes still took the machine
    c = recorded("url-target-other-bound")
    assert c["target"] == "python3 at http://127.0.0.1:15503" and round(c["target_pct"]) == 14
    kind, text = verdict(c)
    assert kind == "other processes" and "python3 at http://127.0.0.1:15503 14%" in text


# ---- the figures the issue reported, which the old rule got wrong
def test_jmeter_at_three_quarters_is_the_limit_even_with_some_cpu_left():
    # matrix run at 50 threads: JMeter 76 %, registry-cache 7 % (the old rule: "none")
    kind, text = verdict(cpu(machine_busy=84, jmeter=76, target=7, upstream=0, other=1))
    assert kind == "load generator saturated" and "JMeter alone took 76%" in text


def test_other_processes_larger_than_jmeter_are_not_the_load_generator():
    # other processes 46 %, JMeter 39 % on a full machine (the old rule: "load generator saturated")
    assert verdict(cpu(machine_busy=97, jmeter=39, target=8, upstream=2, other=46))[0] == "other processes"


def test_distribution_as_the_target_is_seen():
    # a --url target (compare.sh's distribution proxy) is measured as the target, not "everything else"
    c = cpu(tname="docker-registry at http://127.0.0.1:40000", machine_busy=95, jmeter=30, target=55, upstream=5, other=5)
    kind, text = verdict(c)
    assert kind == "target saturated" and "docker-registry at http://127.0.0.1:40000" in text


# ---- thresholds
def test_busy_machine_threshold():
    below = cpu(machine_busy=summarize.MACHINE_BUSY_PCT - 1, jmeter=40, target=30, upstream=4, other=10)
    assert verdict(below)[0] == "none"
    at = dict(below, machine_busy_pct=summarize.MACHINE_BUSY_PCT)
    assert verdict(at)[0] == "load generator saturated"
    at.update(jmeter_pct=30, target_pct=40)
    assert verdict(at)[0] == "target saturated"
    at.update(target_pct=10, upstream_pct=50)
    assert verdict(at)[0] == "upstream saturated"


def test_dominant_share_threshold():
    assert verdict(cpu(machine_busy=80, jmeter=summarize.DOMINANT_PCT, target=5, other=5))[0] == "load generator saturated"
    assert verdict(cpu(machine_busy=80, jmeter=summarize.DOMINANT_PCT - 1, target=5, other=5))[0] == "none"
    assert verdict(cpu(machine_busy=80, jmeter=5, target=summarize.DOMINANT_PCT, other=5))[0] == "target saturated"


def test_docker_proxy_and_dockerd_count_with_the_rest():
    c = cpu(machine_busy=96, jmeter=30, target=20, upstream=1, other=15)
    c.update(docker_proxy_pct=20, dockerd_pct=10)
    assert verdict(c)[0] == "other processes"


def test_no_cpu_figures_is_unknown():
    assert verdict(None)[0] == "unknown"


def test_engines_on_this_machine_add_up_with_the_controller():
    engines = [{"engine": "127.0.0.1:1099", "local": True, "cpu_pct": 30.0},
               {"engine": "127.0.0.1:1101", "local": True, "cpu_pct": 28.0}]
    assert verdict(cpu(machine_busy=93, jmeter=2, target=20, other=13), engines)[0] == "load generator saturated"
    engines[1]["cpu_pct"] = 5.0
    assert verdict(cpu(machine_busy=93, jmeter=2, target=40, other=13), engines)[0] == "target saturated"


def test_a_hot_engine_elsewhere_is_the_load_generator():
    remote = [{"engine": "10.0.0.5:1099", "local": False, "cpu_pct": None}]
    assert verdict(cpu(machine_busy=50, jmeter=1, target=40), remote)[0] == "none"
    assert "not recorded" in verdict(cpu(machine_busy=50, jmeter=1, target=40), remote)[1]
    remote[0]["cpu_pct"] = float(summarize.LOADGEN_PCT)
    assert verdict(cpu(machine_busy=50, jmeter=1, target=40), remote)[0] == "load generator saturated"


def test_network_disk_from_iowait_or_cut_connections():
    assert verdict(cpu(machine_busy=40, jmeter=10, target=10, iowait=summarize.IOWAIT_PCT))[0] == "network/disk"
    errs = {"error_pct": 2.0, "error_reasons": {"connection reset": 3, "HTTP 404": 1}}
    assert verdict(cpu(machine_busy=40, jmeter=10, target=10), errors=errs)[0] == "network/disk"
    errs = {"error_pct": 2.0, "error_reasons": {"HTTP 404": 4}}
    assert verdict(cpu(machine_busy=40, jmeter=10, target=10), errors=errs)[0] == "none"


def test_summary_md_ends_with_the_verdict(tmp_path):
    (tmp_path / "results.csv").write_text(
        "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes\n"
        "1000,50,manifest,200,OK,127.0.0.1:1099-pullers 1-1,text,true,,100\n")
    (tmp_path / "cpu.env").write_text("wall_s=10\ncores=2\nmachine_busy_s=19.5\njmeter_s=4\nengines_s=6\n"
                                      "target=registry-cache\ntarget_s=3\n")
    (tmp_path / "engines").mkdir()
    (tmp_path / "engines" / "engines.tsv").write_text(
        "engine\tlocal\tpid\tcpu_s\tcpu_pct\trss_max_mib\trss_end_mib\n127.0.0.1:1099\tyes\t1\t6\t30\t300\t290\n")
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path),
                    "--cpu", str(tmp_path / "cpu.env")], check=True, capture_output=True)
    md = (tmp_path / "summary.md").read_text().rstrip("\n").splitlines()
    # 97.5 % busy: JMeter 20 % + its engine here 30 % is the largest share
    assert md[-1].startswith("Verdict: load generator saturated - ")
    engines = next(line for line in md if line.startswith("JMeter remote engines (1;"))
    # the engine's share of the samples, from the host:port JMeter puts before its thread names
    assert "127.0.0.1:1099 (this machine): 0 images (0 failed), 1 requests; CPU 6.0 core-s (30.0%)" in engines
    # the engines' CPU (run.sh writes engines_s) is theirs, not "everything else": 19.5 - 4 - 3 - 6
    assert "everything else 6.5" in "\n".join(md)
    assert "registry-cache (target) 3.0 (15%)" in "\n".join(md)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
