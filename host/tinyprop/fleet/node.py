"""One member of a fleet: a board (any engine: the host board, a qemu-m4 process, a real board
on a serial port) with its own data, doing what a federated round asks of it through the
Engine API: take the global trainable parameters (PUSH_PARAMS on a board), train E local epochs
on its own train split, score its holdout, give back its parameters. No Flower here: the
ClientApp (apps.py) wraps it, and a test or a script can drive it directly.

    fleet = FleetConfig(Path("m.tpb"), Path("vww-mini"), ("haze", "night"), board="host")
    node = BoardNode(fleet, "haze", index=0)
    arrays, result = node.train(fleet.layout().initial_arrays(), round_=1)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from itertools import islice
from pathlib import Path

import numpy as np

from ..compile.blobfile import TrainingBlob, load_blob
from ..data.datasets import load_dataset, load_split
from ..data.shifts import SHIFTS
from ..engines import Engine, HParams, open_engine
from ..errors import DeviceError, TinypropError
from ..training.evaluate import evaluate_engine
from ..training.head import read_labels
from ..training.run import RunConfig, check_samples, training_events
from .params import AGGREGATIONS, ParamsLayout

ROUND_TIMEOUT = 3600.0  # s a round waits for replies (Flower's default): a board on a slow
# serial link takes minutes a round (a 96x96 RGB sample is 2.4 s at 115,200 baud)


@dataclass(frozen=True)
class FleetConfig:
    """A fleet run: the blob every board runs, the data and the boards' names (each a camera
    shift of `data` or a sub-folder of it), the board of every node (`board`, an engine spec:
    host, qemu-m4, a port; or `boards`, one a client, a mixed fleet; a node's own config may
    name its port instead), the rounds, the local epochs and the
    SGD settings of every board, the aggregation, and where the global .tflite of each round
    goes (`out`, a folder; None: not exported); `server` names the server's own holdout (the
    global model scored on it on this machine before the first round and after each)."""

    blob: Path
    data: Path
    clients: tuple[str, ...]
    board: str = "host"
    rounds: int = 5
    epochs: int = 1
    lr: float = 0.005
    seed: int = 0
    aggregation: str = "fedavg"
    holdout: float | None = None  # a seeded fraction of every class, instead of holdout.txt
    model: Path | None = None  # the blob's source .tflite, when it moved since convert
    out: Path | None = None
    boards: tuple[str, ...] = ()  # one engine spec a client, in --clients order; () all `board`
    server: str | None = None  # the server's holdout: a camera shift of `data` or a sub-folder
    log: Path | None = None  # the fleet log (JSONL events, `tinyprop monitor`); None: none
    round_timeout: float = ROUND_TIMEOUT  # s the server waits for a round's replies

    def __post_init__(self) -> None:
        for name in ("blob", "data", "model", "out", "log"):  # a Ray worker has its own directory
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)).resolve())
        if self.aggregation not in AGGREGATIONS:
            raise TinypropError(f"--strategy {self.aggregation}: unknown; use one of "
                                f"{', '.join(AGGREGATIONS)}")
        if len(set(self.clients)) != len(self.clients) or not self.clients:
            raise TinypropError(f"--clients {','.join(self.clients)}: name each board once "
                                "(a camera shift or a sub-folder of --data)")
        if self.boards and len(self.boards) != len(self.clients):
            raise TinypropError(f"--board {','.join(self.boards)}: {len(self.boards)} boards "
                                f"for {len(self.clients)} clients; give one board for all, or "
                                "one a client in --clients order")
        for name, value in (("--rounds", self.rounds), ("--epochs", self.epochs)):
            if value < 1:
                raise TinypropError(f"{name} {value}: must be at least 1")
        if not self.round_timeout > 0:
            raise TinypropError(f"--round-timeout {self.round_timeout}: must be a positive "
                                "number of seconds")

    def to_run_config(self) -> dict[str, str | int | float]:
        """The fleet as a Flower run config (TOML values: no None, so an unset option is
        left out; lists as comma-separated names), what a Deployment Engine run carries to
        its ServerApp and ClientApps (from_run_config)."""
        config: dict[str, str | int | float] = {
            "blob": str(self.blob), "data": str(self.data), "clients": ",".join(self.clients),
            "board": self.board, "boards": ",".join(self.boards), "rounds": self.rounds,
            "epochs": self.epochs, "lr": self.lr, "seed": self.seed,
            "strategy": self.aggregation, "round-timeout": self.round_timeout}
        for key, value in (("holdout", self.holdout), ("model", self.model),
                           ("out", self.out), ("server-holdout", self.server),
                           ("log", self.log)):
            if value is not None:
                config[key] = value if isinstance(value, float) else str(value)
        return config

    @classmethod
    def from_run_config(cls, config: dict) -> FleetConfig:
        """The fleet a run config names (to_run_config's)."""
        def names(key: str) -> tuple[str, ...]:
            return tuple(n for n in str(config.get(key, "")).split(",") if n)

        optional = {key: config.get(key)
                    for key in ("holdout", "model", "out", "server-holdout", "log")}
        return cls(Path(str(config["blob"])), Path(str(config["data"])), names("clients"),
                   str(config["board"]), int(config["rounds"]), int(config["epochs"]),
                   float(config["lr"]), int(config["seed"]), str(config["strategy"]),
                   None if optional["holdout"] is None else float(optional["holdout"]),
                   None if optional["model"] is None else Path(str(optional["model"])),
                   None if optional["out"] is None else Path(str(optional["out"])),
                   names("boards"), optional["server-holdout"],
                   None if optional["log"] is None else Path(str(optional["log"])),
                   float(config.get("round-timeout", ROUND_TIMEOUT)))

    def board_of(self, name: str) -> str:
        """The engine spec client `name` runs on."""
        return self.boards[self.clients.index(name)] if self.boards else self.board

    def training_blob(self) -> TrainingBlob:
        return _training_blob(self.blob, self.model)

    def layout(self) -> ParamsLayout:
        return _layout(self.blob, self.model)


@cache
def _training_blob(blob: Path, model: Path | None) -> TrainingBlob:
    """The blob with its program, rebuilt once a process (a Ray actor serves many rounds)."""
    return load_blob(blob, model)


@cache
def _layout(blob: Path, model: Path | None) -> ParamsLayout:
    tb = _training_blob(blob, model)
    return ParamsLayout.from_blob(tb.blob, tb.name)


@dataclass(frozen=True)
class RoundResult:
    """What a board reports after its local training: the steps it took (FedAvg's weight), its
    accuracy on its own train samples while training and on its holdout after, and n."""

    steps: int
    train_accuracy: float
    accuracy: float
    holdout: int


class BoardNode:
    """Board `name` of a fleet (its data: the camera shift or sub-folder of that name), on
    engine spec `board` (default the fleet's), its rounding seed the fleet's + `index`.
    `pool`: the clients whose data it holds instead, all together (`pooled`)."""

    def __init__(self, fleet: FleetConfig, name: str, index: int = 0, board: str | None = None,
                 pool: tuple[str, ...] = ()):
        self.fleet, self.name, self.index = fleet, name, index
        self.board = board or fleet.board_of(name)
        self.tb = fleet.training_blob()
        self.layout = fleet.layout()
        pool = pool or (name,)
        classes = {client_classes(fleet, c) for c in pool}
        if len(classes) > 1:
            raise TinypropError(f"--clients {','.join(pool)}: their datasets have different "
                                "classes; give the boards datasets of the same classes")
        self.classes = classes.pop()
        train = [client_split(fleet, c, "train") for c in pool]
        holdout = [client_split(fleet, c, "holdout") for c in pool]
        self.train_xs, self.train_ys = (np.concatenate(a) for a in zip(*train, strict=True))
        self.holdout_xs, self.holdout_ys = (np.concatenate(a) for a in zip(*holdout, strict=True))
        check_samples(self.tb, self.train_xs, self.train_ys, client_data(fleet.data, pool[0])[0],
                      self.classes)

    @classmethod
    def pooled(cls, fleet: FleetConfig) -> BoardNode:
        """One board (the first client's) with every client's data: the centralized bound, the
        most a fleet could learn were the data pooled."""
        return cls(fleet, fleet.clients[0], pool=fleet.clients)

    @property
    def local_steps(self) -> int:
        return self.fleet.epochs * len(self.train_xs)

    def _hparams(self) -> HParams:
        return HParams(self.fleet.lr, self.fleet.seed + self.index)

    def train(self, arrays: dict[str, np.ndarray], round_: int
              ) -> tuple[dict[str, np.ndarray], RoundResult]:
        """Train round `round_` (1, 2, ...) from the global `arrays`: its steps continue the
        board's count across rounds (fresh epoch orders and rounding keys every round); a
        blob's momentum starts from zero velocities every round (the board's optimizer state
        is local to a round: it never travels)."""
        steps = self.local_steps
        start = (round_ - 1) * steps
        cfg = RunConfig(self.fleet.lr, self._hparams().seed, "constant", classes=self.classes)
        with board_session(self.board, self.tb, self._hparams()) as engine:
            engine.load_params(self.layout.join(arrays), start)
            events = training_events(cfg, self.tb, engine, self.train_xs, self.train_ys,
                                     start + steps, start)
            # the start event and the steps; not the summary, which would time extra
            # inferences on a board that counts its cost
            correct = sum(bool(ev["correct"]) for ev in islice(events, 1 + steps)
                          if ev["type"] == "step")
            trained = self.layout.split(engine.params())
            accuracy = _holdout_score(engine, self.holdout_xs, self.holdout_ys, self.classes)
        return trained, RoundResult(steps, correct / steps, accuracy, len(self.holdout_ys))

    def train_alone(self, rounds: int) -> tuple[dict[str, np.ndarray], RoundResult]:
        """This board trained alone for the fleet's `rounds` (the same steps, orders and
        roundings as in the fleet, from its own arrays each round): the baseline a fleet must
        beat. Its arrays, and its last round's result with the steps of all."""
        arrays = self.layout.initial_arrays()
        for round_ in range(1, rounds + 1):
            arrays, result = self.train(arrays, round_)
        return arrays, RoundResult(rounds * result.steps, result.train_accuracy,
                                   result.accuracy, result.holdout)

    def evaluate(self, arrays: dict[str, np.ndarray]) -> float:
        """The holdout accuracy of the global `arrays` on this board."""
        return holdout_accuracy(self.fleet, self.name, arrays, self.board)


def holdout_accuracy(fleet: FleetConfig, name: str, arrays: dict[str, np.ndarray],
                     board: str = "host") -> float:
    """The accuracy of trainable `arrays` on the holdout of `name` (a camera shift of the
    fleet's data or its sub-folder), on engine `board`: a board's score of a global model, or
    the server's on its own holdout (the C core on this machine)."""
    xs, ys = client_split(fleet, name, "holdout")
    with board_session(board, fleet.training_blob(), None) as engine:
        engine.load_params(fleet.layout().join(arrays), 0)
        return _holdout_score(engine, xs, ys, client_classes(fleet, name))


@contextmanager
def board_session(board: str, tb: TrainingBlob, hparams: HParams | None) -> Iterator[Engine]:
    """The engine of `board` for one message; a link that fails says how the board process
    it started ended, when it did (killed, exited), as tinyprop train does."""
    with open_engine(board, tb, hparams) as engine:
        try:
            yield engine
        except DeviceError as exc:
            ended = engine.status()
            if not ended:
                raise
            raise DeviceError(f"{exc}; {ended}", exc.status) from None


def _holdout_score(engine: Engine, xs: np.ndarray, ys: np.ndarray,
                   classes: tuple[str, ...]) -> float:
    """The accuracy of `engine` as it stands on holdout samples xs, ys."""
    return float(evaluate_engine(engine, xs, ys, classes)["accuracy"])


def client_split(fleet: FleetConfig, name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Board `name`'s int8 samples and labels of `split`: the fleet's data seen through camera
    shift `name`, or its sub-folder `name` as it is (decoded once a process)."""
    return _client_split(fleet.blob, fleet.model, fleet.data, name, split, fleet.holdout)


@cache
def _client_split(blob: Path, model: Path | None, data: Path, name: str, split: str,
                  holdout: float | None) -> tuple[np.ndarray, np.ndarray]:
    tb = _training_blob(blob, model)
    t_in = tb.graph.input
    root, shift = client_data(data, name)
    xs, ys, _ = load_split(root, split, t_in.s, t_in.zp, shift, t_in.shape[1:], holdout,
                           tb.labels or read_labels(tb.source))
    return xs, ys


def client_data(data: Path, name: str) -> tuple[Path, str]:
    """(dataset folder, shift) of board `name`: a camera shift of `data`, or its sub-folder."""
    if name in SHIFTS:
        return data, name
    if (data / name).is_dir():
        return data / name, "none"
    raise TinypropError(f"--clients {name}: neither a camera shift ({', '.join(sorted(SHIFTS))})"
                        f" nor a sub-folder of {data}; name a shift or a folder of --data")


def client_classes(fleet: FleetConfig, name: str) -> tuple[str, ...]:
    """The class names of board `name`'s dataset, in label order."""
    tb = fleet.training_blob()
    root, _ = client_data(fleet.data, name)
    return load_dataset(root, fleet.holdout, tb.labels or read_labels(tb.source)).classes
