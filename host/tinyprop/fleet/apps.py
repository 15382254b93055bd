"""The fleet's Flower apps (Flower's Message API): a ClientApp whose node drives one board
(node.BoardNode) and a ServerApp whose strategy aggregates the blob's trainable parameters
only (params.aggregate), exports the global model as .tflite after every round and keeps
what each round saw (FleetServer.rounds, the `tinyprop fleet` JSON).

Messages: the server sends `arrays` (an ArrayRecord, one Array a trainable array, params.py's
names) and `config` (`server-round`); a board replies with its `arrays` after training,
`metrics` (a MetricRecord: steps, accuracy, train-accuracy, holdout, blob-id) and `board` (a
ConfigRecord: its name). A node's name and board come from its node config (`name`, `board`:
e.g. the serial port of a real board, on a Deployment Engine SuperNode's --node-config; and
`blob`, `data`, `model`: where that machine keeps its copies, when not where the run config
says), else,
under the Simulation Engine, from its partition id in the fleet's --clients.

The aggregation is params.aggregate's, not Flower's FedAvg / FedMedian / FedTrimmedAvg: those
would average the int8 and int32 arrays in float and return floats; these follow the same
definitions, exactly, with the blob's scales (params.py). A reply that fails params' checks is
refused with its reason, and the round goes on with the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from ..errors import TinypropError
from ..monitor.runlog import RunLog
from ..training.export import export_params
from .node import BoardNode, FleetConfig, RoundResult, holdout_accuracy
from .params import ParamsLayout, Update, UpdateRejected, aggregate

log = logging.getLogger("tinyprop.fleet")
PARTITION_ID = "partition-id"  # the Simulation Engine's node config: the node's index
BOARD_FAILED = 4001  # an error reply's code: its board failed, the reason names the board
NODE_PATHS = ("blob", "data", "model")  # node config keys: this machine's copies of the fleet's
UNNAMED = "node "  # a board known by its node id only: "node 123..."
PULL_INTERVAL = 0.1  # s between the server's pulls for replies (Flower's in-memory grid's)


def to_record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({name: Array(np.ascontiguousarray(a)) for name, a in arrays.items()})


def from_record(record: ArrayRecord) -> dict[str, np.ndarray]:
    return {name: record[name].numpy() for name in record}


def node_name(fleet: FleetConfig, context: Context) -> str:
    """The board a ClientApp's context names: node config `name`, or the simulation's partition
    id into fleet.clients."""
    cfg = context.node_config
    return str(cfg["name"]) if "name" in cfg else fleet.clients[int(cfg[PARTITION_ID])]


def node_of(fleet: FleetConfig, context: Context) -> BoardNode:
    """The BoardNode a ClientApp's context names (node_name; node config `board` names its
    engine, else the fleet's board for it)."""
    cfg = context.node_config
    name = node_name(fleet, context)
    index = fleet.clients.index(name) if name in fleet.clients else int(cfg.get(PARTITION_ID, 0))
    return BoardNode(fleet, name, index, str(cfg["board"]) if "board" in cfg else None)


def client_app(fleet: FleetConfig | None = None) -> ClientApp:
    """The ClientApp of `fleet`'s boards (None: the fleet its run config names, on the
    Deployment Engine: FleetConfig.from_run_config). A board that fails (its process killed,
    its port gone, its data unreadable) answers with an error reply naming it (BOARD_FAILED),
    which the strategy counts; the round goes on with the others."""
    app = ClientApp()

    def reply(msg: Message, context: Context, work: Callable[[BoardNode], RecordDict]) -> Message:
        this = fleet or FleetConfig.from_run_config(context.run_config)
        local = {key: Path(str(value)) for key, value in context.node_config.items()
                 if key in NODE_PATHS}
        if local:  # a SuperNode's machine keeps its copies elsewhere
            this = replace(this, **local)
        name = node_name(this, context)
        try:
            content = work(node_of(this, context))
        except TinypropError as exc:
            return Message(Error(BOARD_FAILED, f"{name}: {exc}"), reply_to=msg)
        content["board"] = ConfigRecord({"name": name})
        return Message(content, reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        def work(node: BoardNode) -> RecordDict:
            arrays = from_record(msg.content["arrays"])
            trained, r = node.train(arrays, int(msg.content["config"]["server-round"]))
            metrics = MetricRecord({"steps": r.steps, "accuracy": r.accuracy,
                                    "train-accuracy": r.train_accuracy, "holdout": r.holdout,
                                    "blob-id": node.layout.blob_id})
            return RecordDict({"arrays": to_record(trained), "metrics": metrics})

        return reply(msg, context, work)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        def work(node: BoardNode) -> RecordDict:
            accuracy = node.evaluate(from_record(msg.content["arrays"]))
            return RecordDict({"metrics": MetricRecord({"accuracy": accuracy,
                                                        "holdout": len(node.holdout_ys)})})

        return reply(msg, context, work)

    return app


@dataclass
class RoundRecord:
    """One round as the server saw it: the updates it aggregated (with each board's metrics),
    the ones it refused (board, reason), the boards that failed (board, reason), the global
    arrays it made, and the boards' holdout accuracy of those (board -> (accuracy, n))."""

    round: int
    updates: list[Update] = field(default_factory=list)
    results: dict[str, RoundResult] = field(default_factory=dict)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    global_arrays: dict[str, np.ndarray] | None = None
    evaluations: dict[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def global_accuracy(self) -> float | None:
        """The global model's accuracy over every board's holdout samples."""
        n = sum(k for _, k in self.evaluations.values())
        return sum(a * k for a, k in self.evaluations.values()) / n if n else None

    def to_json(self) -> dict:
        return {"round": self.round, "global_accuracy": self.global_accuracy,
                "clients": [{"name": u.board, "accuracy": self.results[u.board].accuracy,
                             "train_accuracy": self.results[u.board].train_accuracy,
                             "steps": u.steps,
                             "global_accuracy": self.evaluations.get(u.board, (None,))[0]}
                            for u in self.updates],
                "rejected": [{"name": b, "reason": r} for b, r in self.rejected],
                "failed": [{"name": b, "reason": r} for b, r in self.failed]}


def failure(msg: Message) -> tuple[str | None, str]:
    """(board, reason) of an error reply: a board's failure names it (BOARD_FAILED); any other
    error (a bug raised in a ClientApp, which Ray wraps in tracebacks after "Message: ") names
    no board, and its reason is its last line."""
    reason = msg.error.reason
    if msg.error.code == BOARD_FAILED and ": " in reason:
        board, reason = reason.split(": ", 1)
        return board, reason
    reason = reason.rsplit("Message: ", 1)[-1]
    lines = [line.strip(" '>") for line in reason.strip().splitlines() if line.strip(" '>")]
    return None, lines[-1] if lines else f"error {msg.error.code}"


class FleetStrategy(FedAvg):
    """Flower's FedAvg round structure (every node trains, every node evaluates) with the
    fleet's checks and aggregation of the trainable arrays; `rounds` keeps each round, and
    `emit` is told each thing the server sees (the fleet log's events, docs/fleet.md)."""

    def __init__(self, fleet: FleetConfig, layout: ParamsLayout,
                 emit: Callable[[dict], None] = lambda event: None):
        n = len(fleet.clients)
        super().__init__(min_train_nodes=n, min_evaluate_nodes=n, min_available_nodes=n,
                         weighted_by_key="steps")
        self.fleet, self.layout, self.emit = fleet, layout, emit
        self.rounds: list[RoundRecord] = []
        self.names: dict[int, str] = {}  # node id -> board name, from its replies
        self.grid: StoppableGrid | None = None  # the grid of the run (serve sets it)

    def _construct_messages(self, record: RecordDict, node_ids: list[int],
                            message_type: str) -> Iterable[Message]:
        """FedAvg's messages, each living as long as the server waits for its reply: a node
        that comes back later (a SuperNode restarted) is not handed rounds already over."""
        messages = list(super()._construct_messages(record, node_ids, message_type))
        for message in messages:
            message.metadata.ttl = self.fleet.round_timeout
        return messages

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        messages = super().configure_train(server_round, arrays, config, grid)
        # Every board is waited for before the first round; after it, a round goes on with the
        # nodes connected: a board whose machine is gone must not hold the fleet up
        self.min_available_nodes = self.min_train_nodes = self.min_evaluate_nodes = 1
        self.emit({"type": "round", "round": server_round, "phase": "train",
                   "nodes": len(list(grid.get_node_ids()))})
        return messages

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        messages = super().configure_evaluate(server_round, arrays, config, grid)
        self.emit({"type": "round", "round": server_round, "phase": "evaluate",
                   "nodes": len(list(grid.get_node_ids()))})
        return messages

    def _silent(self) -> list[tuple[str, str]]:
        """(board, reason) of every node the last send_and_receive got no reply from in time."""
        if self.grid is None:
            return []
        wait = self.fleet.round_timeout
        return [(self.names.get(node, f"{UNNAMED}{node}"), f"no reply within {wait:g} s "
                 "(--round-timeout)") for node in self.grid.unanswered]

    def _board_event(self, server_round: int, board: str, status: str, **fields) -> None:
        self.emit({"type": "board", "round": server_round, "name": board, "status": status,
                   **fields})

    def _board(self, msg: Message) -> str:
        """The board a reply comes from: its name, or the name its node gave before (an error
        reply carries none; one the SuperLink made for a node gone is from the node the
        message went to)."""
        node = msg.metadata.src_node_id
        if self.grid is not None:
            node = self.grid.sent.get(msg.metadata.reply_to_message_id, node)
        if msg.has_content() and "board" in msg.content:
            self.names[node] = str(msg.content["board"]["name"])
        return self.names.get(node, f"{UNNAMED}{node}")

    def name_nodes(self) -> None:
        """After the run: a board that failed before it ever replied was listed by its node
        id; named now if it replied later (a SuperNode keeps its id across a restart)."""
        for rec in self.rounds:
            rec.failed = [(self.names.get(int(board[len(UNNAMED):]), board)
                           if board.startswith(UNNAMED) else board, reason)
                          for board, reason in rec.failed]

    def _round(self, server_round: int) -> RoundRecord:
        if not self.rounds or self.rounds[-1].round != server_round:
            self.rounds.append(RoundRecord(server_round))
        return self.rounds[-1]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        rec = self._round(server_round)
        for msg in replies:
            if msg.has_error():
                board, reason = failure(msg)
                rec.failed.append((board or self._board(msg), reason))
                log.warning("round %d: %s failed: %s", server_round, *rec.failed[-1])
                self._board_event(server_round, rec.failed[-1][0], "failed", reason=reason)
                continue
            board = self._board(msg)
            try:
                m = msg.content["metrics"]
                arrays = self.layout.check(from_record(msg.content["arrays"]),
                                           int(m["blob-id"]), m["steps"], board)
            except UpdateRejected as e:
                rec.rejected.append((board, e.reason))
                log.warning("round %d: %s", server_round, e)
                self._board_event(server_round, board, "refused", reason=e.reason)
                continue
            rec.updates.append(Update(board, arrays, int(m["steps"])))
            result = RoundResult(int(m["steps"]), float(m["train-accuracy"]),
                                 float(m["accuracy"]), int(m["holdout"]))
            rec.results[board] = result
            self._board_event(server_round, board, "trained", steps=result.steps,
                              accuracy=result.accuracy, train_accuracy=result.train_accuracy)
        for board, reason in self._silent():
            rec.failed.append((board, reason))
            log.warning("round %d: %s failed: %s", server_round, board, reason)
            self._board_event(server_round, board, "failed", reason=reason)
        if not rec.updates:  # nothing usable: the global model stays as it was
            return None, None
        # replies come in any order; the aggregate does not depend on it (exact integer sums,
        # sorts), the report lists the boards in the fleet's order
        order = {name: i for i, name in enumerate(self.fleet.clients)}
        rec.updates.sort(key=lambda u: (order.get(u.board, len(order)), u.board))
        rec.global_arrays = aggregate(self.layout, rec.updates, self.fleet.aggregation,
                                      self.fleet.seed, server_round)
        steps = sum(u.steps for u in rec.updates)
        accuracy = sum(rec.results[u.board].accuracy * u.steps for u in rec.updates) / steps
        return to_record(rec.global_arrays), MetricRecord({"steps": steps,
                                                          "accuracy": accuracy})

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        rec = self._round(server_round)
        for msg in replies:
            if msg.has_error():
                board, reason = failure(msg)
                board = board or self._board(msg)
                log.warning("round %d: evaluating on %s failed: %s", server_round, board,
                            reason)
                self._board_event(server_round, board, "failed", reason=reason,
                                  phase="evaluate")
                continue
            m = msg.content["metrics"]
            board = self._board(msg)
            rec.evaluations[board] = (float(m["accuracy"]), int(m["holdout"]))
            self._board_event(server_round, board, "scored",
                              global_accuracy=float(m["accuracy"]))
        for board, reason in self._silent():
            log.warning("round %d: evaluating on %s failed: %s", server_round, board, reason)
            self._board_event(server_round, board, "failed", reason=reason, phase="evaluate")
        accuracy = rec.global_accuracy
        return None if accuracy is None else MetricRecord({"accuracy": accuracy})


class FleetStopped(Exception):
    """The fleet's run was stopped (FleetServer.stop): the server's rounds end here."""


class StoppableGrid:
    """A Grid whose send_and_receive also ends when `stop` is set (raising FleetStopped): the
    thread Flower runs a ServerApp in waits for replies up to an hour otherwise, and keeps the
    process from exiting after Ctrl-C. Everything else is the grid's."""

    def __init__(self, grid: Grid, stop: threading.Event):
        self._grid, self._stop = grid, stop
        self.unanswered: list[int] = []  # the nodes the last call got no reply from in time
        self.sent: dict[str, int] = {}  # message id -> the node it went to, every call's

    def __getattr__(self, name: str):
        return getattr(self._grid, name)

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> Iterable[Message]:
        """Grid.send_and_receive (push, then pull the replies until all came or `timeout`),
        checking `stop` between pulls; `unanswered` lists the nodes still silent at `timeout`."""
        messages = list(messages)
        sent = dict(zip(self._grid.push_messages(messages),
                        (m.metadata.dst_node_id for m in messages), strict=True))
        self.sent.update(sent)
        waiting = set(sent)
        end = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while waiting and (end is None or time.monotonic() < end):
            if self._stop.is_set():
                raise FleetStopped("the fleet was stopped")
            got = list(self._grid.pull_messages(waiting))
            replies += got
            waiting -= {m.metadata.reply_to_message_id for m in got}
            if waiting:
                time.sleep(PULL_INTERVAL)
        self.unanswered = sorted(sent[m] for m in waiting)
        return replies


class FleetServer:
    """The ServerApp of a fleet (`.app`) and, once it ran, its strategy's rounds. `stop` ends
    its rounds (its thread) early: set it when the run is interrupted. With `fleet.log`, what
    the server sees is written there as it happens (a JSONL event a line, docs/fleet.md: the
    fleet log, which `tinyprop monitor` shows)."""

    def __init__(self, fleet: FleetConfig):
        self.fleet = fleet
        self.layout = fleet.layout()
        self._log: RunLog | None = None
        self.strategy = FleetStrategy(fleet, self.layout, self.emit)
        self.exported: list[str] = []
        self.server_accuracy: dict[int, float] = {}  # round -> the global on the server's holdout
        self.stop = threading.Event()
        self.ended = threading.Event()  # its rounds are over (done or stopped), its log closed
        self.app = ServerApp()
        self.app.main()(self.serve)

    @property
    def rounds(self) -> list[RoundRecord]:
        return self.strategy.rounds

    def emit(self, event: dict) -> None:
        if self._log is not None:
            self._log.write(event)

    def serve(self, grid: Grid, context: Context) -> None:
        """The fleet's rounds on `grid` (a ServerApp's main)."""
        fleet = self.fleet
        if fleet.log is not None:
            fleet.log.unlink(missing_ok=True)  # one run a log
            self._log = RunLog(fleet.log)
        self.emit({"type": "fleet", "clients": list(fleet.clients),
                   "boards": {name: fleet.board_of(name) for name in fleet.clients},
                   "rounds": fleet.rounds, "epochs": fleet.epochs,
                   "strategy": fleet.aggregation, "blob_id": f"{self.layout.blob_id:08x}",
                   "bytes": self.layout.params_bytes, "server_holdout": fleet.server})
        self.strategy.grid = StoppableGrid(grid, self.stop)
        ended = "stopped"
        try:
            self.strategy.start(self.strategy.grid, to_record(self.layout.initial_arrays()),
                                num_rounds=fleet.rounds, timeout=fleet.round_timeout,
                                evaluate_fn=self._after_round)
            ended = "completed"
        finally:
            self.strategy.name_nodes()
            self.emit({"type": "fleet_end", "status": ended, "rounds": len(self.rounds)})
            if self._log is not None:
                self._log.close()
                self._log = None
            self.ended.set()

    def _after_round(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """After each round, the global model as a .tflite (round 0: the blob's, not written)
        and its accuracy on the server's holdout (round 0 too: where the fleet starts)."""
        global_arrays = from_record(arrays)
        event: dict = {"type": "global", "round": server_round}
        if server_round > 0:
            event["global_accuracy"] = self.rounds[-1].global_accuracy if self.rounds else None
            if self.fleet.out is not None:
                out = self.fleet.out / f"round-{server_round}.tflite"
                export_params(self.fleet.training_blob(), self.layout.join(global_arrays), out)
                self.exported.append(str(out))
                event["exported"] = str(out)
        accuracy = None
        if self.fleet.server is not None:
            accuracy = holdout_accuracy(self.fleet, self.fleet.server, global_arrays)
            self.server_accuracy[server_round] = accuracy
            event["server_accuracy"] = accuracy
        self.emit(event)
        return None if accuracy is None else MetricRecord({"accuracy": accuracy})
