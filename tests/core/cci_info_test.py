#!/usr/bin/env python3
"""cci_info_test.py - runs cci_info in one situation and checks what it says.

usage: cci_info_test.py CASE CCI_INFO [--config FILE] [--have tcp|sock|ofi]... [--plugin-dir DIR]

CASE is one of:
  example     CCI_CONFIG=--config (config/cci.ini.example): its devices, in
              order, with their settings; each plugin's ini keys; text and
              --json agree; -v, -h and a bad option behave.
  tcp-manual  CCI_CONFIG=--config (tests/tcp/tcp-manual.ini): one tcp
              device with the plugin's own priority.
  discovered  no CCI_CONFIG: the sm device is discovered, with no conf_argv.
  broken      broken files written to a temporary directory: exit 1, the
              library's message names file and line, cci_info's names the
              status and the file; --json gives an error document.
  escaping    a file whose section name and value hold quotes, a backslash,
              a tab, a control byte, UTF-8 and a byte that is not UTF-8: the
              JSON parses and gives the strings back.
  skipped     CCI_PLUGIN_PATH=--plugin-dir (the bad plugins of tests/core):
              each is listed as skipped with its reason; CCI_CTP exclusions
              and duplicates are listed too, and a plugin table from before
              conf_keys loads, with no keys.
  leftovers   shm regions in /dev/shm and sm directories under a private
              base (an sm device's path=) named for a dead pid, for this
              live process, and of other names: --leftovers lists the first
              two kinds only, with pid, owner and size, and removes nothing;
              --remove-leftovers removes those of the dead pid, keeps this
              process's, and says which it could not remove and why (exit 1).

--have names the optional plugins that were built: their devices must then
be listed, and must not be otherwise.  Prints "N passed, N failed".
Only the standard library is used.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CCI_VARS = ("CCI_CONFIG", "CCI_CTP", "CCI_PLUGIN_PATH", "CCI_DEBUG")


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL: " + what + (("\n  " + detail.replace("\n", "\n  ")) if detail else ""))
        return ok


def run(cci_info, args=(), uid=None, **env):
    """cci_info with only the CCI_* variables given, as uid if given;
    (rc, stdout, stderr)."""
    e = {k: v for k, v in os.environ.items() if k not in CCI_VARS}
    e.update({k: v for k, v in env.items() if v is not None})
    as_uid = (lambda: (os.setgid(uid), os.setuid(uid))) if uid is not None else None
    p = subprocess.run([cci_info] + list(args), env=e, capture_output=True, text=True,
                       errors="replace", timeout=120, preexec_fn=as_uid)
    return p.returncode, p.stdout, p.stderr


def parse_text(out):
    """The text output as {'config', 'devices': [...], 'plugins': [...]}."""
    doc = {"config": None, "devices": [], "plugins": []}
    section = None
    last_key = None
    for line in out.splitlines():
        if line.startswith("config: "):
            doc["config"] = line[len("config: "):]
        elif line.startswith("devices: "):
            section = "devices"
        elif line.startswith("plugins: "):
            section = "plugins"
        elif not line.startswith(" "):
            section = None
        elif section == "devices" and line.startswith("  ") and line[2] != " ":
            doc["devices"].append({"name": line[2:], "conf_argv": []})
        elif section == "devices" and line.startswith("    ") and doc["devices"]:
            dev = doc["devices"][-1]
            if line[4] != " ":
                key, _, val = line[4:].partition(":")
                last_key, val = key, val.strip()
            else:
                val = line.strip()
            if last_key == "conf_argv":
                if not val.startswith("(none"):
                    dev["conf_argv"].append(val)
            else:
                dev[last_key] = val
        elif section == "plugins" and line.startswith("  ") and line[2] != " ":
            name, _, rest = line[2:].partition(": ")
            if rest.startswith("skipped: "):
                doc["plugins"].append({"name": name, "status": "skipped",
                                       "reason": rest[len("skipped: "):]})
            else:
                doc["plugins"].append({"name": name, "status": "loaded", "reason": "",
                                       "line": rest})
        elif section == "plugins" and line.startswith("    path: ") and doc["plugins"]:
            doc["plugins"][-1]["path"] = line[len("    path: "):]
        elif section == "plugins" and line.startswith("    key ") and doc["plugins"]:
            name, _, desc = line[len("    key "):].partition(": ")
            doc["plugins"][-1].setdefault("keys", []).append(
                {"name": name, "desc": desc, "help": ""})
        elif section == "plugins" and line.startswith("      ") and doc["plugins"] and \
                doc["plugins"][-1].get("keys"):
            key = doc["plugins"][-1]["keys"][-1]
            key["help"] = (key["help"] + " " + line.strip()).strip()
    return doc


def key_desc(k):
    """What the text output says of a key of the JSON document."""
    desc = {"integer": lambda: "integer %d..%d" % (k["min"], k["max"]),
            "string": lambda: "string of %d..%d bytes" % (k["min"], k["max"]),
            "choice": lambda: "one of " + ", ".join(k["choices"]),
            "custom": lambda: "string the plugin checks"}[k["type"]]()
    return desc + ("; default " + k["default"] if k["default"] is not None else "")


def get_json(c, cci_info, **env):
    rc, out, err = run(cci_info, ["--json"], **env)
    c.check(rc == 0, "cci_info --json exits 0", "rc %d, stderr:\n%s" % (rc, err))
    try:
        doc = json.loads(out)
    except ValueError as exc:
        c.check(False, "cci_info --json prints one JSON document", "%s\n%s" % (exc, out))
        return None
    c.check(isinstance(doc, dict) and doc.get("abi_version") == 2,
            "the JSON document has abi_version 2")
    for key, kind in (("devices", list), ("plugins", list), ("plugin_dirs", list),
                      ("environment", dict)):
        c.check(isinstance(doc.get(key), kind), "the JSON document has %s" % key)
    return doc


def check_agree(c, text, doc):
    """The text and JSON outputs describe the same devices and plugins."""
    yesno = {True: "yes", False: "no"}
    tdev = [(d["name"], d.get("transport"), d.get("up"), d.get("default"),
             d.get("priority"), d.get("max_send_size"), d["conf_argv"]) for d in text["devices"]]
    jdev = [(d["name"], d["transport"], yesno[d["up"]], yesno[d["default"]],
             str(d["priority"]), str(d["max_send_size"]), d["conf_argv"]) for d in doc["devices"]]
    c.check(tdev == jdev, "text and JSON list the same devices in the same order",
            "text: %r\njson: %r" % (tdev, jdev))
    tplug = [(p["name"], p["status"], p["reason"]) for p in text["plugins"]]
    jplug = [(p["name"], p["status"], p["reason"]) for p in doc["plugins"]]
    c.check(tplug == jplug, "text and JSON list the same plugins with the same reasons",
            "text: %r\njson: %r" % (tplug, jplug))


def device(doc, name):
    return next((d for d in doc["devices"] if d["name"] == name), None)


def plugin(doc, name, status=None):
    return next((p for p in doc["plugins"] if p["name"] == name and
                 (status is None or p["status"] == status)), None)


def check_device(c, doc, name, want):
    d = device(doc, name)
    if not c.check(d is not None, "device %s is listed" % name, json.dumps(doc["devices"])):
        return
    for key, val in want.items():
        c.check(d.get(key) == val, "device %s: %s is %r" % (name, key, val),
                "got %r" % d.get(key))


def check_loaded(c, doc, name, transport):
    p = plugin(doc, name)
    if c.check(p is not None and p["status"] == "loaded", "plugin %s is loaded" % name,
               json.dumps(doc["plugins"])):
        c.check(transport in p["transports"], "plugin %s serves %s" % (name, transport))
        c.check(p["path"].endswith("/cci_ctp_%s.so" % name) and p["reason"] == "",
                "plugin %s has its path and no reason" % name, json.dumps(p))


def case_example(c, a):
    have = set(a.have)
    rc, out, err = run(a.cci_info, CCI_CONFIG=a.config)
    c.check(rc == 0, "cci_info exits 0 with the example file", "rc %d\n%s" % (rc, err))
    text = parse_text(out)
    c.check(text["config"] == a.config + " (CCI_CONFIG)", "the text names the config file",
            repr(text["config"]))
    doc = get_json(c, a.cci_info, CCI_CONFIG=a.config)
    if doc is None:
        return
    check_agree(c, text, doc)
    c.check(doc["config"] == a.config and doc["environment"]["CCI_CONFIG"] == a.config,
            "the JSON names the config file")
    want = ["sm0"] + (["tcp-lo"] if "tcp" in have else []) + \
        (["ofi-tcp-lo"] if "ofi" in have else []) + (["sock-lo"] if "sock" in have else [])
    c.check([d["name"] for d in doc["devices"]] == want,
            "the devices are the file's sections whose plugin is built, default first",
            "want %r, got %r" % (want, [d["name"] for d in doc["devices"]]))
    check_device(c, doc, "sm0", {"transport": "sm", "up": True, "default": True,
                                 "priority": 50, "max_send_size": 8192, "pci": None,
                                 "conf_argv": ["transport=sm", "default=1", "priority=50",
                                               "mss=8192"]})
    c.check(text["devices"] and text["devices"][0].get("pci") == "none",
            "a device off PCI shows pci: none")
    check_loaded(c, doc, "sm", "sm")
    check_keys(c, doc, "sm", SM_KEYS)
    if "tcp" in have:
        check_keys(c, doc, "tcp", TCP_KEYS)
    if "ofi" in have:
        check_keys(c, doc, "ofi", OFI_KEYS)
    if "tcp" in have:
        check_device(c, doc, "tcp-lo", {"transport": "tcp", "up": True, "default": False,
                                        "priority": 30, "conf_argv": ["transport=tcp",
                                                                      "ip=127.0.0.1",
                                                                      "priority=30"]})
        c.check("127.0.0.1" in (device(doc, "tcp-lo") or {}).get("info", ""),
                "tcp-lo's info names its address")
        check_loaded(c, doc, "tcp", "tcp")
    if "ofi" in have:
        check_device(c, doc, "ofi-tcp-lo", {"transport": "ofi", "default": False,
                                            "priority": 20,
                                            "conf_argv": ["transport=ofi", "provider=tcp",
                                                          "iface=lo", "priority=20"]})
        check_loaded(c, doc, "ofi", "ofi")
    if "sock" in have:
        check_keys(c, doc, "sock", SOCK_KEYS)
        check_device(c, doc, "sock-lo", {"transport": "sock", "up": True, "default": False,
                                         "priority": 10, "conf_argv": ["transport=sock",
                                                                       "ip=127.0.0.1",
                                                                       "priority=10"]})
        check_loaded(c, doc, "sock", "sock")
    check_options(c, a, out, doc)


PROGRESS_KEY = ("progress", "choice", None, None, ["auto", "manual"], "auto")
SM_KEYS = [("path", "string", 1, 89, [], None), ("mss", "integer", 64, 1048576, [], "8192"),
           ("rma", "choice", None, None, ["cma", "copy"], "cma"), PROGRESS_KEY]
TCP_KEYS = [("ip", "custom", None, None, [], None),
            ("interface", "string", 1, 15, [], None),
            ("port", "integer", 0, 65535, [], "0"),
            ("mss", "integer", 64, 16777216, [], "65536"),
            ("bufsize", "integer", 0, 268435456, [], "0"),
            ("progress", "choice", None, None, ["auto", "manual"], "auto")]
SOCK_KEYS = TCP_KEYS[:3] + [("mss", "integer", 64, 8388608, [], "65536"),
                            ("bufsize", "integer", 0, 268435456, [], "0"),
                            ("progress", "choice", None, None, ["auto", "manual"], "auto")]
OFI_KEYS = [("provider", "string", 1, 63, [], None), ("domain", "string", 1, 63, [], None),
            ("iface", "string", 1, 63, [], None),
            ("mss", "integer", 8192, 1048576, [], "65536"), PROGRESS_KEY]


def check_keys(c, doc, name, want):
    """The JSON lists plugin name's ini keys, in order, each with a help text."""
    p = plugin(doc, name) or {}
    got = [(k["name"], k["type"], k["min"], k["max"], k["choices"], k["default"])
           for k in p.get("keys", [])]
    c.check(got == want, "plugin %s lists its ini keys with type, range, choices and default"
            % name, "want %r\ngot  %r" % (want, got))
    c.check(all(isinstance(k["help"], str) and k["help"] for k in p.get("keys", [])),
            "every key of plugin %s has a help text" % name, json.dumps(p.get("keys")))


def check_options(c, a, plain, doc):
    """-v adds paths, keys, directories and the environment; -h and bad options."""
    c.check("path: " not in plain and "search directories" not in plain and
            "    key " not in plain,
            "without -v no plugin path, key or search directory is shown")
    rc, out, err = run(a.cci_info, ["-v"], CCI_CONFIG=a.config)
    c.check(rc == 0, "cci_info -v exits 0", err)
    text = parse_text(out)
    c.check([p.get("path") for p in text["plugins"]] == [p["path"] for p in doc["plugins"]],
            "-v shows each plugin's path", out)
    tkeys = [[(k["name"], k["desc"], k["help"]) for k in p.get("keys", [])]
             for p in text["plugins"]]
    jkeys = [[(k["name"], key_desc(k), k["help"]) for k in p["keys"]] for p in doc["plugins"]]
    c.check(tkeys == jkeys, "-v shows each plugin's keys as the JSON does",
            "text: %r\njson: %r" % (tkeys, jkeys))
    c.check(doc["plugin_dirs"] and "plugin search directories, in order:\n" +
            "".join("  %s\n" % d for d in doc["plugin_dirs"]) in out,
            "-v lists the search directories, as the JSON does", out)
    c.check("  CCI_CONFIG=%s\n" % a.config in out and "  CCI_CTP=(unset)\n" in out,
            "-v shows the environment")
    rc, out, err = run(a.cci_info, ["--help"])
    c.check(rc == 0 and out.startswith("usage: cci_info") and "--json" in out,
            "--help prints the usage and exits 0", out + err)
    rc, out, err = run(a.cci_info, ["-h"])
    c.check(rc == 0 and out.startswith("usage: cci_info"), "-h prints the usage")
    rc, out, err = run(a.cci_info, ["--no-such-option"])
    c.check(rc == 2 and "usage: cci_info" in err and out == "",
            "an unknown option exits 2 with the usage on stderr", "rc %d" % rc)
    rc, out, err = run(a.cci_info, ["extra"])
    c.check(rc == 2 and "extra" in err, "a stray argument exits 2 naming it", err)


def case_tcp_manual(c, a):
    rc, out, err = run(a.cci_info, CCI_CONFIG=a.config)
    c.check(rc == 0, "cci_info exits 0 with tcp-manual.ini", err)
    doc = get_json(c, a.cci_info, CCI_CONFIG=a.config)
    if doc is None:
        return
    check_agree(c, parse_text(out), doc)
    c.check([d["name"] for d in doc["devices"]] == ["tcp-manual"],
            "the one device is tcp-manual", json.dumps(doc["devices"]))
    check_device(c, doc, "tcp-manual", {"transport": "tcp", "up": True, "default": False,
                                        "priority": 30, "max_send_size": 65536,
                                        "conf_argv": ["transport=tcp", "ip=127.0.0.1",
                                                      "progress=manual"]})
    c.check("127.0.0.1" in (device(doc, "tcp-manual") or {}).get("info", ""),
            "its info names its address")
    check_loaded(c, doc, "tcp", "tcp")


def case_discovered(c, a):
    rc, out, err = run(a.cci_info)
    c.check(rc == 0, "cci_info exits 0 without CCI_CONFIG", err)
    text = parse_text(out)
    c.check(text["config"] is not None and text["config"].startswith("none"),
            "the text says there is no config file", repr(text["config"]))
    doc = get_json(c, a.cci_info)
    if doc is None:
        return
    check_agree(c, text, doc)
    c.check(doc["config"] is None and doc["environment"]["CCI_CONFIG"] is None,
            "the JSON config is null")
    sm = [d for d in doc["devices"] if d["transport"] == "sm"]
    if c.check(len(sm) == 1, "exactly one sm device is discovered", json.dumps(doc["devices"])):
        c.check(sm[0]["up"] and sm[0]["priority"] == 50 and sm[0]["max_send_size"] > 0,
                "the sm device is up, with the sm plugin's priority 50", json.dumps(sm[0]))
    c.check(all(d["conf_argv"] == [] for d in doc["devices"]),
            "discovered devices have an empty conf_argv")
    c.check("    conf_argv:     (none: a discovered device)" in out,
            "the text says a discovered device has no conf_argv")
    c.check(not any(d["default"] for d in doc["devices"]), "no discovered device is default")
    check_loaded(c, doc, "sm", "sm")
    if "verbs" in a.have:
        check_verbs_discovered(c, doc, out)


VERBS_NO_DEVICE = "no RDMA device found (ibv_get_device_list returned none)"


def check_verbs_discovered(c, doc, out):
    """The verbs plugin is found; on a host without an RDMA device it has
    none and its note says why, in the JSON and in the text."""
    check_loaded(c, doc, "verbs", "verbs")
    p = plugin(doc, "verbs") or {}
    devs = [d for d in doc["devices"] if d["transport"] == "verbs"]
    if devs:
        c.check(p.get("note") == "", "verbs has devices and no note", json.dumps(p))
        return
    c.check(p.get("note") == VERBS_NO_DEVICE, "verbs, with no device, says why",
            json.dumps(p))
    c.check("  verbs: loaded (transports: verbs): " + VERBS_NO_DEVICE + "\n" in out,
            "the text lists verbs as loaded with the reason it has no device")


BROKEN = (
    ("priority.ini", "[a]\ntransport = sm\npriority = 500\n", 3, "priority", "CCI_EINVAL"),
    ("syntax.ini", "# devices\n[a]\ntransport = sm\nthis line is wrong\n", 4, "expected",
     "CCI_EINVAL"),
    ("transport.ini", "[a]\ntransport = sm\n[b]\ntransport = carrier-pigeon\n", 3,
     "unknown transport", "CCI_EINVAL"),
)


def case_broken(c, a):
    with tempfile.TemporaryDirectory() as tmp:
        for name, body, line, word, status in BROKEN:
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
            check_broken(c, a, path, line, word, status)
        missing = os.path.join(tmp, "missing.ini")
        rc, out, err = run(a.cci_info, CCI_CONFIG=missing)
        c.check(rc == 1 and "cci_init failed: CCI_ERR_NOT_FOUND" in err and
                "cci_info: configuration file %s (CCI_CONFIG) cannot be read" % missing in err,
                "an unreadable file: exit 1, CCI_ERR_NOT_FOUND and its path", err)


def check_broken(c, a, path, line, word, status):
    rc, out, err = run(a.cci_info, CCI_CONFIG=path)
    tag = os.path.basename(path)
    c.check(rc == 1, "%s: exit status 1" % tag, "rc %d" % rc)
    where = [l for l in err.splitlines() if "%s:%d:" % (path, line) in l]
    c.check(len(where) == 1 and word in where[0],
            "%s: the library's message names %s:%d and the problem" % (tag, path, line), err)
    c.check("cci_info: cci_init failed: %s (" % status in err,
            "%s: cci_info says cci_init failed with %s" % (tag, status), err)
    c.check("cci_info: configuration file %s (CCI_CONFIG)" % path in err,
            "%s: cci_info names the CCI_CONFIG file" % tag, err)
    c.check(out == "", "%s: nothing on stdout without --json" % tag, out)
    rc, out, err = run(a.cci_info, ["--json"], CCI_CONFIG=path)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {}
    e = doc.get("error") or {}
    c.check(rc == 1 and doc.get("config") == path and e.get("call") == "cci_init" and
            e.get("status") == status and isinstance(e.get("code"), int),
            "%s: --json prints an error document and exits 1" % tag, out)


def case_escaping(c, a):
    odd = b'"q" \\ \xc3\xa9 \xff\tx\x01'
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "odd.ini")
        with open(path, "wb") as f:
            f.write(b"[sm " + odd + b"]\ntransport = sm\npath = /nonexistent/" + odd + b"\n")
        rc, out, err = run(a.cci_info, ["--json"], CCI_CONFIG=path)
    c.check(rc == 0, "cci_info --json exits 0 with odd bytes in the file", err)
    c.check("\\u0001" in out and "\\ufffd" in out and "\\t" in out,
            "control bytes are \\u escapes and a non-UTF-8 byte is U+FFFD", out)
    try:
        doc = json.loads(out)
    except ValueError as exc:
        c.check(False, "the JSON with odd bytes parses", "%s\n%s" % (exc, out))
        return
    want = '"q" \\ \u00e9 \ufffd\tx\x01'
    devs = doc.get("devices") or [{}]
    c.check(devs[0].get("name") == "sm " + want, "the section name comes back intact",
            repr(devs[0].get("name")))
    c.check(devs[0].get("conf_argv") == ["transport=sm", "path=/nonexistent/" + want],
            "the conf_argv strings come back intact", repr(devs[0].get("conf_argv")))


def case_skipped(c, a):
    d = a.plugin_dir
    rc, out, err = run(a.cci_info, ["-v"], CCI_PLUGIN_PATH=d)
    c.check(rc == 0, "cci_info exits 0 with the bad plugins in CCI_PLUGIN_PATH", err)
    doc = get_json(c, a.cci_info, CCI_PLUGIN_PATH=d)
    if doc is None:
        return
    check_agree(c, parse_text(out), doc)
    c.check(d in doc["plugin_dirs"], "CCI_PLUGIN_PATH is a search directory",
            json.dumps(doc["plugin_dirs"]))
    for name, reason in (("badabi", "ABI version "), ("badops", "mandatory op missing ("),
                         ("badinit", "init failed ("),
                         ("badkeys", 'conf_keys: key "mss": default "8192" is not an integer '
                                     'in 64..1024'),
                         ("badundef", "cannot load: undefined symbol: bad_plugin_missing_symbol")):
        p = plugin(doc, name)
        if c.check(p is not None, "plugin %s is listed" % name, json.dumps(doc["plugins"])):
            c.check(p["status"] == "skipped" and p["reason"].startswith(reason),
                    "plugin %s is skipped: %s..." % (name, reason), json.dumps(p))
            c.check(p["path"] == os.path.join(d, "cci_ctp_%s.so" % name),
                    "plugin %s has its path" % name, p["path"])
            c.check("  %s: skipped: %s" % (name, reason) in out and
                    "    path: %s" % p["path"] in out,
                    "the text shows %s skipped with its reason and path" % name, out)
            c.check(p["keys"] == [], "plugin %s lists no keys" % name, json.dumps(p))
    old = plugin(doc, "oldsize")
    c.check(old is not None and old["status"] == "loaded" and old["keys"] == [],
            "a plugin table from before conf_keys is loaded, with no keys", json.dumps(old))
    check_loaded(c, doc, "sm", "sm")
    check_keys(c, doc, "sm", SM_KEYS)
    c.check(not any(x["transport"].startswith("bogus") for x in doc["devices"]),
            "no device of a skipped plugin is listed")
    check_filtered(c, a, doc)


def check_filtered(c, a, doc):
    """CCI_CTP exclusions and a second copy of a plugin are skipped by name."""
    d = a.plugin_dir
    j = get_json(c, a.cci_info, CCI_PLUGIN_PATH=d, CCI_CTP="^badinit")
    p = plugin(j, "badinit") if j else None
    c.check(p is not None and p["status"] == "skipped" and
            p["reason"] == "excluded by CCI_CTP=^badinit" and "bogus-badinit" in p["transports"],
            "CCI_CTP=^badinit: badinit is skipped as excluded", json.dumps(p))
    sm = plugin(doc, "sm", "loaded")
    if not sm:
        return
    sm_dir = os.path.dirname(sm["path"])
    j = get_json(c, a.cci_info, CCI_PLUGIN_PATH=sm_dir + ":" + d)
    dup = [x for x in (j or {}).get("plugins", []) if x["name"] == "sm"]
    c.check(len(dup) == 2 and dup[0]["status"] == "loaded" and dup[1]["status"] == "skipped" and
            dup[1]["reason"] == "a plugin named sm was already loaded from " + dup[0]["path"],
            "a second sm module is skipped, naming the first", json.dumps(dup))


def dead_pid():
    """A pid whose process is gone (a reaped child)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def make(path, size=0):
    with open(path, "wb") as f:
        f.truncate(size)


# Leftovers are made for a uid of their own when the test runs as root, and
# cci_info runs as that uid: the sweeps of other processes of the library
# (other tests of this run) look at their own uid's only, so they cannot
# remove a dead pid's region before cci_info lists it.
LEFTOVER_UID = 4242 if os.geteuid() == 0 else None


def leftovers_json(c, a, args, ini, want_rc=0):
    rc, out, err = run(a.cci_info, args + ["--json"], uid=LEFTOVER_UID, CCI_CONFIG=ini,
                       CCI_CTP="sm")
    c.check(rc == want_rc, "cci_info %s exits %d" % (" ".join(args), want_rc),
            "rc %d, stderr:\n%s" % (rc, err))
    try:
        doc = json.loads(out)
    except ValueError as exc:
        c.check(False, "cci_info %s --json prints one JSON document" % " ".join(args),
                "%s\n%s" % (exc, out))
        return {}, err
    return {x["path"]: x for x in doc.get("leftovers", [])}, err


def case_leftovers(c, a):
    gone, gone2, me = dead_pid(), dead_pid(), os.getpid()
    with tempfile.TemporaryDirectory(prefix="cci-info-leftovers-") as tmp:
        base = os.path.join(tmp, "sm")
        os.mkdir(base, 0o700)
        ini = os.path.join(tmp, "sm.ini")
        with open(ini, "w") as f:
            f.write("[sm]\ntransport = sm\npath = %s\n" % base)
        region = "/dev/shm/%d:0:0" % gone
        mine = "/dev/shm/%d:9:9" % me
        other = "/dev/shm/cci-info-test-%d" % me
        dead_dir = os.path.join(base, str(gone))
        stuck = os.path.join(base, str(gone2))
        foreign = "/dev/shm/%d:5:5" % gone  # root's, when cci_info runs as LEFTOVER_UID
        for p, size in ((region, 8192), (mine, 4096), (other, 0), (foreign, 0)):
            make(p, size)
        os.mkdir(dead_dir, 0o700)
        make(os.path.join(dead_dir, "0"), 100)
        os.makedirs(os.path.join(stuck, "sub"), 0o700)
        if LEFTOVER_UID is not None:
            for p in (tmp, ini, region, mine, other):
                os.chown(p, LEFTOVER_UID, LEFTOVER_UID)
            for root, dirs, files in os.walk(base):
                for p in [root] + [os.path.join(root, x) for x in dirs + files]:
                    os.chown(p, LEFTOVER_UID, LEFTOVER_UID)
        try:
            check_leftovers(c, a, ini, region, mine, other, dead_dir, stuck, gone, me)
        finally:
            for p in (region, mine, other, foreign):
                if os.path.exists(p):
                    os.unlink(p)


def check_leftovers(c, a, ini, region, mine, other, dead_dir, stuck, gone, me):
    found, _ = leftovers_json(c, a, ["--leftovers"], ini)
    r = found.get(region, {})
    c.check(r.get("pid") == gone and r.get("owner") == "gone" and r.get("bytes") == 8192 and
            r.get("kind") == "shm-region", "a dead pid's region is listed: pid, gone, size",
            json.dumps(r))
    m = found.get(mine, {})
    c.check(m.get("pid") == me and m.get("owner") == "running",
            "this process's region is listed as running", json.dumps(m))
    d = found.get(dead_dir, {})
    c.check(d.get("kind") == "sm-dir" and d.get("owner") == "gone" and d.get("bytes") == 100,
            "a dead pid's sm directory under the device's path= is listed", json.dumps(d))
    c.check(other not in found, "another name in /dev/shm is not listed")
    if LEFTOVER_UID is not None:
        c.check("/dev/shm/%d:5:5" % gone not in found, "nor another uid's region")
    c.check(all(os.path.exists(p) for p in (region, mine, dead_dir, stuck)),
            "--leftovers removes nothing")
    rc, out, _ = run(a.cci_info, ["--leftovers"], uid=LEFTOVER_UID, CCI_CONFIG=ini,
                     CCI_CTP="sm")
    c.check(rc == 0 and region in out and "pid %d: gone" % gone in out and dead_dir in out,
            "the text lists the same, with pid and owner", out)
    found, err = leftovers_json(c, a, ["--remove-leftovers"], ini, want_rc=1)
    c.check(not os.path.exists(region) and found.get(region, {}).get("removed") is True,
            "--remove-leftovers removes a dead pid's region", json.dumps(found.get(region)))
    c.check(not os.path.exists(dead_dir), "and a dead pid's sm directory with its files")
    c.check(os.path.exists(mine) and "removed" not in found.get(mine, {"removed": 1}),
            "and keeps this process's region, not trying it")
    c.check(os.path.exists(other), "and another name")
    s = found.get(stuck, {})
    c.check(os.path.exists(stuck) and s.get("removed") is False and s.get("error"),
            "a directory it cannot empty stays, with the reason", json.dumps(s))
    c.check(stuck in err and "cannot remove" in err, "stderr names what was not removed", err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["example", "tcp-manual", "discovered", "broken", "escaping",
                                       "skipped", "leftovers"])
    ap.add_argument("cci_info")
    ap.add_argument("--config")
    ap.add_argument("--have", action="append", default=[])
    ap.add_argument("--plugin-dir")
    a = ap.parse_args()
    a.cci_info = os.path.abspath(a.cci_info)
    c = Checker()
    {"example": case_example, "tcp-manual": case_tcp_manual, "discovered": case_discovered,
     "broken": case_broken, "escaping": case_escaping, "skipped": case_skipped,
     "leftovers": case_leftovers}[a.case](c, a)
    print("%d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed or c.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
