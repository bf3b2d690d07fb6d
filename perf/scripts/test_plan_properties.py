"""pytest perf/scripts/test_plan_properties.py: the plan checks its own properties before anything starts
(pull.jmx's properties_ok), with the same rules as the scripts (lib.sh's plan_property_error), and every
property it checks is one it reads."""
import html
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PLAN = os.path.join(HERE, "..", "jmeter", "pull.jmx")
LIB = os.path.join(HERE, "lib.sh")


def plan_text():
    with open(PLAN) as f:
        return f.read()


def plan_checked_keys():
    text = plan_text()
    m = re.search(r'<stringProp name="Argument.name">properties_ok</stringProp>\s*'
                  r'<stringProp name="Argument.value">(.*?)</stringProp>', text, re.S)
    assert m, "pull.jmx has no properties_ok check"
    groovy = html.unescape(m.group(1))
    rules = re.search(r"def rules = \[(.*?)\]; def bad", groovy, re.S).group(1)
    return set(re.findall(r"(?:^|\\, )([a-z_]+): \[\{", rules))


def lib_checked_keys():
    with open(LIB) as f:
        text = f.read()
    body = re.search(r"plan_property_error\(\) \{(.*?)\n\}", text, re.S).group(1)
    keys = set()
    for label in re.findall(r"^\s+([a-z_|]+)\)$", body, re.M):
        keys.update(label.split("|"))
    return keys


def test_the_plan_and_the_scripts_check_the_same_properties():
    plan, lib = plan_checked_keys(), lib_checked_keys()
    assert "threads" in plan and "mode" in plan and "auth" in plan and "timeout" in plan
    assert plan == lib


def test_every_checked_property_is_one_the_plan_reads():
    text = plan_text()
    read = set(re.findall(r"__P\(([a-z_]+)", text)) | set(re.findall(r"props\.getProperty\('([a-z_]+)'\)", text))
    assert plan_checked_keys() <= read


def test_lib_rules_refuse_what_the_issue_found():
    def why(k, v):
        return subprocess.run(["bash", "-c", f'source "{LIB}"; plan_property_error "$1" "$2"', "_", k, v],
                              capture_output=True, text=True, check=True).stdout.strip()
    for k, v in (("threads", "abc"), ("mode", "bogus"), ("auth", "bogus"), ("timeout", "-1"), ("loops", "0")):
        assert why(k, v), f"{k}={v} was accepted"
    for k, v in (("threads", "100"), ("mode", "pull-through"), ("auth", "bearer"), ("timeout", "0"), ("loops", "-1")):
        assert why(k, v) == "", f"{k}={v} was refused"
