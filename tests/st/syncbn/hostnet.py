"""Test hosts on one machine: Linux network namespaces joined by veth links to a bridge.

    net = HostNet(n_hosts)        # builds <tag>s (the switch, a bridge) and <tag>h0 .. h<n-1>
    net.run(i, argv, ...)         # a process inside host i (subprocess.Popen)
    net.link_down(i)              # pulls host i's cable (its port on the switch goes down)
    net.close()                   # kills what runs in the namespaces, deletes them (idempotent)

Host i has one interface, eth0, with address 10.77.0.(i+1)/24, plus its own
loopback; the bridge lives in a namespace of its own, so nothing is added to
the machine's own network stack and no address outside the namespaces'
private range (and loopback) is ever used. Every name carries a tag made of
this process's pid and a random suffix, so parallel or killed runs never
collide; `reap_stale()` deletes namespaces left by runs whose process is gone.
Needs root and iproute2 (`ip netns add`); `unavailable_reason()` says why not.
"""
import os
import re
import secrets
import shutil
import signal
import subprocess
import time

SUBNET = "10.77.0"
PREFIX = "sbnmh"
_TAG_RE = re.compile(rf"^{PREFIX}(\d+)x[0-9a-f]+[sh]\d*$")


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def address(host):
    return f"{SUBNET}.{host + 1}"


def unavailable_reason():
    """None when namespaces can be built here, else why not (for pytest.skip)."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    name = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}s"
    res = _ip("netns", "add", name, check=False)
    if res.returncode != 0:
        return f"'ip netns add' does not work here: {res.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


def reap_stale():
    """Deletes namespaces of earlier runs whose process no longer exists."""
    res = _ip("netns", "list", check=False)
    for line in res.stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = _TAG_RE.match(name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            _kill_namespace_processes(name)
            _ip("netns", "del", name, check=False)


def _kill_namespace_processes(ns):
    res = _ip("netns", "pids", ns, check=False)
    for pid in res.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


class HostNet:
    """n hosts in namespaces on one bridge; see the module docstring."""

    def __init__(self, n_hosts):
        if n_hosts < 1:
            raise ValueError(f"HostNet: n_hosts expected >= 1, got {n_hosts}")
        self.tag = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        self.switch = f"{self.tag}s"
        self.hosts = [f"{self.tag}h{i}" for i in range(n_hosts)]
        self._made = []
        self.procs = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _add_ns(self, name):
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self):
        self._add_ns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, host in enumerate(self.hosts):
            self._add_ns(host)
            port = self.port(i)
            # created in the switch namespace, its peer directly in the host's: never in ours
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", host, "addr", "add", f"{address(i)}/24", "dev", "eth0")
            _ip("-n", host, "link", "set", "eth0", "up")
        self._wait_reachable()

    def _wait_reachable(self, timeout=20.0):
        """Host 0 answers a ping from every other host (the bridge has learnt the ports)."""
        deadline = time.monotonic() + timeout
        for i in range(1, len(self.hosts)):
            while True:
                res = subprocess.run(["ip", "netns", "exec", self.hosts[i], "ping", "-c", "1", "-W", "1",
                                      address(0)], capture_output=True, text=True, check=False)
                if res.returncode == 0:
                    break
                if shutil.which("ping") is None:
                    return  # nothing to check with; the bridge forwards anyway
                if time.monotonic() > deadline:
                    raise RuntimeError(f"HostNet: host {i} cannot reach {address(0)}: {res.stdout}{res.stderr}")
                time.sleep(0.2)

    def port(self, host):
        return f"p{host}"

    def run(self, host, argv, **popen_kwargs):
        """Starts argv inside host `host`'s namespace (in a session of its own); returns the Popen."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.hosts[host], *argv], start_new_session=True,
                                **popen_kwargs)
        self.procs.append(proc)
        return proc

    def link_down(self, host):
        """Host `host` loses its link: its switch port goes down (nothing reaches it any more)."""
        _ip("-n", self.switch, "link", "set", self.port(host), "down")

    def pids(self, host):
        return [int(p) for p in _ip("netns", "pids", self.hosts[host], check=False).stdout.split()]

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for name in reversed(self._made):
            _kill_namespace_processes(name)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for name in reversed(self._made):
            _ip("netns", "del", name, check=False)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
