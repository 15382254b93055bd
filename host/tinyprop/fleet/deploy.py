"""A fleet run on Flower's Deployment Engine: real processes talking over real sockets. A
SuperLink, one SuperNode a board (its node config names the board's data, `name`: a camera
shift of the fleet's data or a sub-folder of it, and its engine, `board`: host, qemu-m4, the
serial port of a real board), and a Flower App whose components are this module's `server_app`
and `client_app`: the Simulation Engine's apps (apps.py), configured from the run config
(FleetConfig.to_run_config), so both runtimes compute the same rounds bit for bit.

    report = run_fleet_deployed(FleetConfig(Path("m.tpb"), Path("vww-mini"), ("haze", "night")))

LocalFederation starts the pieces on 127.0.0.1 (free ports; TLS with a CA and a server
certificate made for the run; node authentication: one P-384 key a SuperNode, registered with
`flwr supernode register`, so a SuperNode with any other key is refused) and, on exit, ends
every process it started and every process those started (docs/fleet.md: the same pieces by
hand, one SuperNode a machine).
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ..errors import TinypropError
from ..extras import quiet_tensorflow
from .apps import FleetServer
from .apps import client_app as fleet_client_app
from .node import FleetConfig
from .simulation import add_baselines, check_fleet, fleet_report

# The Flower App's components (its pyproject.toml names them): the fleet comes with each run
# (its run config), the board with each SuperNode (its node config).
client_app = fleet_client_app()
server_app = ServerApp()
REPORT = "report"  # the run config's key: where the ServerApp writes the run's JSON


@server_app.main()
def _serve(grid: Grid, context: Context) -> None:
    fleet = FleetConfig.from_run_config(context.run_config)
    server = FleetServer(fleet)
    server.serve(grid, context)
    report = Path(str(context.run_config[REPORT]))
    report.write_text(json.dumps(fleet_report(fleet, server), indent=1) + "\n")


APP_TOML = """\
# A Flower App: tinyprop's fleet (tinyprop.fleet.deploy); `flwr run` submits this folder.
[project]
name = "tinyprop-fleet"
version = "1.0.0"
description = "A fleet of boards training one tinyprop blob together"
license = "Apache-2.0"
dependencies = []  # tinyprop[fleet] is installed beside the SuperLink and each SuperNode

[tool.flwr.app]
publisher = "tinyprop"

[tool.flwr.app.components]
serverapp = "tinyprop.fleet.deploy:server_app"
clientapp = "tinyprop.fleet.deploy:client_app"

[tool.flwr.app.config]
"""

MARK = "TINYPROP_FLEET_RUN"  # in the environment of every process a LocalFederation starts
START_TIMEOUT = 60.0  # s for the SuperLink to listen and the SuperNodes to come online
# s for a restarted SuperNode to rejoin: the SuperLink refuses its key while it holds the killed
# node online, up to two of its 30 s heartbeat intervals (Flower's HEARTBEAT_PATIENCE x
# HEARTBEAT_DEFAULT_INTERVAL), and then it has START_TIMEOUT to come online
REJOIN_TIMEOUT = 2 * 30.0 + START_TIMEOUT
RESTART_EVERY = 3.0  # s between a restarted SuperNode refused and its next start
POLL = 1.0  # s between `flwr list` polls of a run's status once its report is written
STATUS_EVERY = 15.0  # s between them before (a run that fails writes none)
EXIT_WAIT = 10.0  # s a process has to end after SIGTERM before SIGKILL


def write_app(folder: Path, fleet: FleetConfig, report: Path) -> Path:
    """The fleet's Flower App project in `folder` (its pyproject.toml, the run config the
    fleet's with `report`: where the ServerApp writes the run's JSON)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {**fleet.to_run_config(), REPORT: str(report)}
    lines = [f"{key} = {json.dumps(value)}" for key, value in config.items()]
    (folder / "pyproject.toml").write_text(APP_TOML + "\n".join(lines) + "\n")
    return folder


def free_port() -> int:
    """A TCP port nothing listens on on 127.0.0.1 now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signs for 127.0.0.1 and localhost, valid a day:
    (ca.crt, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject: str, key, issuer: x509.Name, signer, extension, critical: bool):
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(issuer).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(extension, critical=critical).sign(signer, hashes.SHA256()))

    ca_key, key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tinyprop fleet CA")])
    ca = certificate("tinyprop fleet CA", ca_key, ca_name, ca_key,
                     x509.BasicConstraints(ca=True, path_length=None), True)
    names = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                         x509.DNSName("localhost")])
    server = certificate("127.0.0.1", key, ca_name, ca_key, names, False)
    pem = serialization.Encoding.PEM
    paths = folder / "ca.crt", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(server.public_bytes(pem))
    paths[2].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


def make_node_key(path: Path) -> tuple[Path, Path]:
    """A SuperNode's key pair as Flower reads them: P-384, OpenSSH format (path, path.pub)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    pub = path.with_suffix(".pub")
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                  serialization.PublicFormat.OpenSSH))
    return path, pub


@dataclass
class SuperNode:
    """One SuperNode a LocalFederation started: its board's name, its key, the port of its
    runtime API (its ClientApps talk to it), its process and log; `registered` whether its
    public key is on the SuperLink's list."""

    name: str
    key: Path
    port: int
    process: subprocess.Popen
    log: Path
    registered: bool
    args: list[str]  # how it was started: a restart (a board's machine rebooting) starts it so


def marked_pids(mark: str) -> list[int]:
    """The live processes whose environment holds MARK=`mark` (Linux's /proc): whatever a
    LocalFederation started, however deep (Flower's SuperExec starts the apps' processes
    detached from their parents)."""
    needle = f"{MARK}={mark}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


class LocalFederation:
    """A Flower federation on 127.0.0.1, every piece a process of its own: a SuperLink (TLS
    and node authentication unless `tls` is False), SuperNodes (add_node), runs submitted
    with `flwr run` (run). Use it as a context manager: on exit, every process it started
    and theirs are ended (SIGTERM, then SIGKILL after EXIT_WAIT s)."""

    def __init__(self, workdir: Path, tls: bool = True):
        self.workdir, self.tls = workdir, tls
        self.port = 0
        self.ca: Path | None = None  # the CA's certificate, with TLS
        self.superlink: subprocess.Popen | None = None
        self.superlink_log = workdir / "superlink.log"
        self.nodes: list[SuperNode] = []
        self._started: list[subprocess.Popen] = []
        self.bin = Path(sys.executable).parent  # Flower's CLI tools, beside this Python
        self.env = quiet_tensorflow({**os.environ, MARK: str(workdir),
                                     "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"})

    def __enter__(self) -> LocalFederation:
        try:
            self.start()
        except BaseException:  # a SuperLink that did not come up is ended all the same
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
        """Start a Flower tool in its own session (the terminal's Ctrl-C reaches this process
        only: close ends them), its own FLWR_HOME, its output in name.log."""
        home = self.workdir / name
        home.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            p = subprocess.Popen([str(self.bin / args[0]), *args[1:]], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**self.env, "FLWR_HOME": str(home)},
                                 start_new_session=True)
        self._started.append(p)
        return p, log

    def start(self) -> None:
        """The SuperLink on a free port, listening (its Control, Fleet and runtime APIs on
        one HTTPS port in Flower 1.42), and the `flwr` CLI's connection to it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        args = ["flower-superlink", "--host", "127.0.0.1", "--port", str(self.port),
                "--disable-runtime-dependency-installation"]
        if self.tls:
            self.ca, cert, key = make_tls(self.workdir)
            args += ["--ssl-ca-certfile", str(self.ca), "--ssl-certfile", str(cert),
                     "--ssl-keyfile", str(key), "--enable-supernode-auth"]
        else:
            args.append("--insecure")
        self.superlink, self.superlink_log = self._spawn("superlink", args)
        connection = [f'address = "127.0.0.1:{self.port}"',
                      f'root-certificates = "{self.ca}"' if self.tls else "insecure = true"]
        cli = self.workdir / "cli"
        cli.mkdir(exist_ok=True)
        (cli / "config.toml").write_text('[superlink]\ndefault = "fleet"\n\n'
                                         '[superlink.fleet]\n' + "\n".join(connection) + "\n")
        end = time.monotonic() + START_TIMEOUT
        while True:
            if self.superlink.poll() is not None:
                raise TinypropError(f"the SuperLink exited ({self.superlink.returncode}): "
                                    f"{tail(self.superlink_log)}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if time.monotonic() > end:
                raise TinypropError(f"the SuperLink did not listen on 127.0.0.1:{self.port} "
                                    f"in {START_TIMEOUT:.0f} s: {tail(self.superlink_log)}")
            time.sleep(0.2)

    def flwr(self, *args: str, timeout: float = 120) -> dict:
        """The `flwr` CLI against this SuperLink, its --format json answer."""
        p = subprocess.run([str(self.bin / "flwr"), *args, "--format", "json"],
                           capture_output=True, text=True, timeout=timeout,
                           env={**self.env, "FLWR_HOME": str(self.workdir / "cli")})
        try:
            answer = json.loads(p.stdout[p.stdout.index("{"):])
        except ValueError:
            answer = {}
        if p.returncode != 0 or not answer.get("success", False):
            raise TinypropError(f"flwr {' '.join(args)}: {answer.get('error-message') or ''}"
                                f"{(p.stderr or p.stdout).strip()[-500:]}")
        return answer

    def add_node(self, name: str, board: str | None = None, register: bool = True) -> SuperNode:
        """A SuperNode owning board `name` (node config `name`, and `board` when given), with
        a key of its own; `register`: its public key goes on the SuperLink's list first (a
        SuperNode whose key is not is refused, with TLS)."""
        config = f"name={json.dumps(name)}" + (f" board={json.dumps(board)}" if board else "")
        port = free_port()
        args = ["flower-supernode", "--superlink", f"127.0.0.1:{self.port}",
                "--port", str(port), "--node-config", config]
        key = self.workdir / f"node-{len(self.nodes)}-{name}.key"
        if self.tls:
            _, pub = make_node_key(key)
            if register:
                self.flwr("supernode", "register", str(pub), "fleet")
            args += ["--root-certificates", str(self.ca), "--auth-supernode-private-key",
                     str(key)]
        else:
            args.append("--insecure")
        p, log = self._spawn(f"supernode-{len(self.nodes)}-{name}", args)
        self.nodes.append(SuperNode(name, key, port, p, log, register, args))
        return self.nodes[-1]

    def restart_node(self, node: SuperNode) -> None:
        """Kill `node`'s SuperNode (its machine losing power) and start it again as it was,
        with its key, as a supervisor would (systemd's Restart=on-failure): the SuperLink
        refuses a key it still holds online (until two of the node's heartbeat intervals pass
        without one: Flower's "Failed to activate SuperNode"), so it is started again every
        RESTART_EVERY s until it says its SuperNode ID: it has rejoined."""
        node.process.kill()
        node.process.wait()
        end = time.monotonic() + REJOIN_TIMEOUT
        for attempt in itertools.count(1):
            node.process, node.log = self._spawn(f"{node.log.stem.split('.')[0]}.{attempt}",
                                                 node.args)
            while True:
                said = node.log.read_text(errors="replace")
                if "SuperNode ID:" in said:
                    return
                if "Failed to activate SuperNode" in said or node.process.poll() is not None:
                    break
                if time.monotonic() > end:
                    raise TinypropError(f"the SuperNode of {node.name} did not come back in "
                                        f"{REJOIN_TIMEOUT:.0f} s: {tail(node.log)}")
                time.sleep(0.2)
            node.process.kill()
            node.process.wait()
            time.sleep(RESTART_EVERY)

    def online(self) -> int:
        """How many SuperNodes the SuperLink has online."""
        return sum(n["status"] == "online" for n in self.flwr("supernode", "list")["nodes"])

    def wait_online(self, count: int) -> None:
        """Until `count` SuperNodes are online; a SuperNode that exits meanwhile (not one
        refused on purpose) ends the wait with its log's last line."""
        end = time.monotonic() + START_TIMEOUT
        while self.online() < count:
            for node in self.nodes:
                if node.registered and node.process.poll() is not None:
                    raise TinypropError(f"the SuperNode of {node.name} exited "
                                        f"({node.process.returncode}): {tail(node.log)}")
            if time.monotonic() > end:
                raise TinypropError(f"{count} SuperNodes not online after {START_TIMEOUT:.0f}"
                                    f" s: {tail(self.superlink_log)}")
            time.sleep(0.5)

    def run(self, fleet: FleetConfig) -> dict:
        """Submit `fleet` as a Flower App run (`flwr run`), wait for it to finish, its
        report (the ServerApp's JSON)."""
        run_dir = self.workdir / f"run-{len(list(self.workdir.glob('run-*')))}"
        report = run_dir / "report.json"
        app = write_app(run_dir / "app", fleet, report)
        run_id = int(self.flwr("run", str(app), "fleet")["run-id"])
        asked = time.monotonic()
        while True:
            # each `flwr list` is a Python process (1 s of CPU or so): asked seldom until the
            # ServerApp wrote its report, its last act, then until the run is finished
            wait = POLL if report.exists() else STATUS_EVERY
            if time.monotonic() - asked >= wait:
                status = self.flwr("list", "--run-id", str(run_id))["runs"][0]["status"]
                asked = time.monotonic()
                if status.startswith("finished"):
                    break
            if self.superlink.poll() is not None:
                raise TinypropError(f"the SuperLink exited ({self.superlink.returncode}) "
                                    f"during run {run_id}: {tail(self.superlink_log)}")
            time.sleep(0.2)
        if status != "finished:completed" or not report.exists():
            raise TinypropError(f"run {run_id} {status}: {self.run_log(run_id)}")
        return json.loads(report.read_text())

    def run_log(self, run_id: int) -> str:
        """The last lines of a run's log (`flwr log --show`)."""
        p = subprocess.run([str(self.bin / "flwr"), "log", str(run_id), "fleet", "--show"],
                           capture_output=True, text=True, timeout=60,
                           env={**self.env, "FLWR_HOME": str(self.workdir / "cli")})
        return "\n".join((p.stdout + p.stderr).strip().splitlines()[-10:])

    def close(self) -> None:
        """End every process started here, and theirs: SIGTERM, SIGKILL after EXIT_WAIT s."""
        for p in self._started:
            if p.poll() is None:
                p.terminate()
        end = time.monotonic() + EXIT_WAIT
        for p in self._started:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for _ in range(50):  # the detached ones: the SuperExecs and the apps they started
            pids = marked_pids(str(self.workdir))
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)


def tail(log: Path, lines: int = 3) -> str:
    """The last lines of a log, on one line."""
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text[-lines:]) or "(empty log)"


def run_fleet_deployed(fleet: FleetConfig, json_path: Path | None = None, tls: bool = True,
                       alone: bool = False, centralized: bool = False,
                       workdir: Path | None = None) -> dict:
    """Run `fleet` on Flower's Deployment Engine on this machine: a SuperLink and one
    SuperNode a board on 127.0.0.1 (TLS and node authentication unless `tls` is False), every
    process ended when it returns or fails (Ctrl-C too; SIGTERM too, then SystemExit(143));
    its report as run_fleet's, also written to `json_path`. `workdir` keeps the
    certificates, keys and logs (default: a temporary folder, removed)."""
    check_fleet(fleet)

    def terminated(signum: int, frame) -> None:
        raise SystemExit(128 + signum)  # unwinds through LocalFederation.close, as Ctrl-C does

    # the processes run in sessions of their own (a terminal's Ctrl-C reaches this one only):
    # a SIGTERM to this process must end them too
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with tempfile.TemporaryDirectory(prefix="tinyprop-fleet-") as tmp:
            with LocalFederation(Path(workdir or tmp).resolve(), tls) as federation:
                for name in fleet.clients:
                    federation.add_node(name, fleet.board_of(name))
                federation.wait_online(len(fleet.clients))
                report = federation.run(fleet)
    finally:
        signal.signal(signal.SIGTERM, previous)
    add_baselines(report, fleet, alone, centralized)
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=1) + "\n")
    return report
