"""An msrun job over namespace hosts: one `msrun --node_rank=i` per host, the scheduler on host 0.

    job = Job(net, out_dir, workers_per_host, spec, join=True, env={...})
    job.wait(timeout)            # every host's msrun; returns their return codes
    job.tails()                  # the end of every worker log (for failure messages)

Host i runs global ranks i*W .. i*W+W-1 (msrun's --node_rank layout). The job
spec (a dict) is written to out_dir/spec.json for mh_worker.py.
"""
import json
import os
import subprocess
import time

from hostnet import address

HERE = os.path.dirname(os.path.abspath(__file__))
MASTER_PORT = 8118          # inside the namespaces: no other job can hold it


class Job:
    def __init__(self, net, out_dir, workers_per_host, spec, join=True, env=None, port=MASTER_PORT):
        self.net, self.out = net, str(out_dir)
        self.hosts = len(net.hosts)
        self.world = self.hosts * workers_per_host
        os.makedirs(self.out, exist_ok=True)
        spec = dict(spec, out=self.out)
        with open(os.path.join(self.out, "spec.json"), "w") as f:
            json.dump(spec, f)
        run_env = dict(os.environ, **(env or {}))
        self.procs, self.log_dirs = [], []
        self.started = time.monotonic()
        for i in range(self.hosts):
            logs = os.path.join(self.out, f"host{i}_logs")
            self.log_dirs.append(logs)
            cmd = ["msrun", f"--worker_num={self.world}", f"--local_worker_num={workers_per_host}",
                   f"--master_addr={address(0)}", f"--master_port={port}", f"--node_rank={i}",
                   f"--join={join}", f"--log_dir={logs}", os.path.join(HERE, "mh_worker.py"),
                   os.path.join(self.out, "spec.json")]
            # MindSpore writes rank_*/ dumps into the cwd: one folder per host, inside out_dir
            cwd = os.path.join(self.out, f"host{i}_cwd")
            os.makedirs(cwd, exist_ok=True)
            with open(os.path.join(self.out, f"host{i}_msrun.out"), "w") as log:
                self.procs.append(net.run(i, cmd, cwd=cwd, env=run_env, stdout=log, stderr=subprocess.STDOUT))

    def wait(self, timeout):
        deadline = self.started + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def worker_logs(self):
        for logs in self.log_dirs:
            for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
                yield os.path.join(logs, name)

    def tails(self, chars=2500):
        parts = []
        for path in self.worker_logs():
            with open(path, errors="replace") as f:
                text = "".join(line for line in f if "WARNING" not in line and "[INFO]" not in line)
            parts.append(f"--- {path}\n{text[-chars:]}")
        for i in range(self.hosts):
            path = os.path.join(self.out, f"host{i}_msrun.out")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    parts.append(f"--- {path}\n{f.read()[-chars:]}")
        return "\n".join(parts)
