"""The fleet's Flower apps without a runtime (tinyprop.fleet.apps): the ClientApp called with a
train or evaluate Message drives a host board exactly as node.BoardNode does; the strategy
aggregates the good replies and refuses a poisoned one, a garbage one and another blob's with
their reasons while the round goes on; the global model of each round is exported as a .tflite
holding the aggregate. The Simulation Engine runs them in test_fleet_cli.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

# tinyprop.fleet (through fleet_data) before flwr: Flower's telemetry off
from fleet_data import tflite_arrays, vww_last2, vww_slice

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from flwr.app import (  # noqa: E402
    ConfigRecord,
    Context,
    Error,
    Message,
    Metadata,
    MetricRecord,
    RecordDict,
)
from tinyprop.fleet.apps import (  # noqa: E402
    BOARD_FAILED,
    FleetServer,
    FleetStrategy,
    client_app,
    from_record,
    to_record,
)
from tinyprop.fleet.node import BoardNode, FleetConfig, client_split  # noqa: E402
from tinyprop.fleet.params import Update, aggregate  # noqa: E402
from tinyprop.training.evaluate import evaluate_tflite  # noqa: E402

CLIENTS = ("haze", "night")


@pytest.fixture(scope="module")
def fleet(vww_model_path, vww_data_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet-apps")
    return FleetConfig(vww_last2(vww_model_path, d / "vww.tpb"),
                       vww_slice(vww_data_dir, d / "data", train=4, holdout=2), CLIENTS,
                       rounds=2, seed=3, out=d / "out")


def instruction(content: RecordDict, node: int, kind: str) -> Message:
    """A message as the server's grid sends it to node `node`."""
    meta = Metadata(run_id=1, message_id=f"m{node}{kind}", src_node_id=0, dst_node_id=node,
                    reply_to_message_id="", group_id="1", created_at=0.0, ttl=3600.0,
                    message_type=kind)
    return Message(content=content, metadata=meta)


def node_context(node: int, config: dict) -> Context:
    return Context(run_id=1, node_id=node, node_config=config, state=RecordDict(),
                   run_config={})


def train_message(arrays: dict, node: int, round_: int = 1) -> Message:
    return instruction(RecordDict({"arrays": to_record(arrays),
                                   "config": ConfigRecord({"server-round": round_})}), node,
                       "train")


def test_the_client_app_trains_and_evaluates_a_board_as_its_node_does(fleet):
    app = client_app(fleet)
    layout = fleet.layout()
    start = layout.initial_arrays()
    reply = app(train_message(start, 7, round_=2), node_context(7, {"partition-id": 1,
                                                                    "num-partitions": 2}))
    assert not reply.has_error()
    assert reply.metadata.reply_to_message_id == "m7train"
    assert reply.content["board"]["name"] == "night"
    node = BoardNode(fleet, "night", index=1)
    want, result = node.train(start, round_=2)
    got = from_record(reply.content["arrays"])
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}
    assert any((got[n] != start[n]).any() for n in start)  # it trained
    m = reply.content["metrics"]
    assert m["steps"] == result.steps == 8  # 1 epoch of 4 photos a class
    assert m["accuracy"] == result.accuracy and m["holdout"] == 4
    assert m["blob-id"] == layout.blob_id
    # a node config naming the board and its engine (a real board's port goes there)
    ev = app(instruction(RecordDict({"arrays": to_record(got), "config": ConfigRecord()}), 8,
                         "evaluate"), node_context(8, {"name": "haze", "board": "host"}))
    assert ev.content["board"]["name"] == "haze"
    assert ev.content["metrics"]["accuracy"] == BoardNode(fleet, "haze").evaluate(got)


def gone_board_reply(fleet, node: int) -> Message:
    """The reply of a node whose node config names a port with no board behind it."""
    return client_app(fleet)(train_message(fleet.layout().initial_arrays(), node),
                             node_context(node, {"name": "haze", "board": "/dev/ttyFLEET9"}))


def test_a_board_that_is_gone_answers_an_error_naming_it(fleet):
    reply = gone_board_reply(fleet, 9)
    assert reply.has_error() and reply.error.code == BOARD_FAILED
    assert reply.error.reason.startswith("haze: link '/dev/ttyFLEET9': cannot open it")
    assert "\n" not in reply.error.reason


def test_the_strategy_aggregates_good_replies_and_refuses_bad_ones(fleet):
    app = client_app(fleet)
    layout = fleet.layout()
    start = layout.initial_arrays()
    replies, sent = [], []
    for i, name in enumerate(CLIENTS):
        msg = train_message(start, 10 + i)
        reply = app(msg, node_context(10 + i, {"partition-id": i, "num-partitions": 2}))
        replies.append(reply)
        sent.append(Update(name, from_record(reply.content["arrays"]),
                           int(reply.content["metrics"]["steps"])))

    def forged(name: str, arrays: dict, blob_id: int) -> Message:
        metrics = MetricRecord({**replies[0].content["metrics"], "blob-id": blob_id})
        return Message(RecordDict({"arrays": to_record(arrays), "metrics": metrics,
                                   "board": ConfigRecord({"name": name})}),
                       reply_to=train_message(start, 20))

    nan = {n: a.astype(np.float32) for n, a in sent[0].arrays.items()}
    nan["op29.weights"][0, 0] = np.nan
    wide = {n: a.astype(np.int16) for n, a in sent[0].arrays.items()}
    wide["op29.weights"][1, 3] = 300
    bad = [forged("poisoned", nan, layout.blob_id), forged("garbage", wide, layout.blob_id),
           forged("stranger", sent[0].arrays, layout.blob_id ^ 1),
           Message(Error(code=0, reason="Traceback ...\nMessage: the board process was killed"),
                   reply_to=train_message(start, 30)), gone_board_reply(fleet, 31)]
    strategy = FleetStrategy(fleet, layout)
    merged, metrics = strategy.aggregate_train(1, [replies[0], *bad, replies[1]])
    rec = strategy.rounds[0]
    assert rec.rejected == [("poisoned", "not_finite"), ("garbage", "out_of_range"),
                            ("stranger", "blob_id")]
    assert [b for b, _ in rec.failed] == ["node 30", "haze"]  # an unnamed error, a named one
    assert rec.failed[0][1] == "the board process was killed"
    assert rec.failed[1][1].startswith("link '/dev/ttyFLEET9': cannot open it")
    assert [u.board for u in rec.updates] == list(CLIENTS)
    want = aggregate(layout, sent, "fedavg", fleet.seed, 1)
    got = from_record(merged)
    assert {n: a.tobytes() for n, a in got.items()} == {n: a.tobytes() for n, a in want.items()}
    assert metrics["steps"] == 16
    # a round where nothing usable came back keeps the global model (Flower keeps its arrays)
    assert strategy.aggregate_train(2, bad) == (None, None)
    assert strategy.rounds[1].global_arrays is None and len(strategy.rounds[1].rejected) == 3
    assert len(strategy.rounds[1].failed) == 2


def test_each_rounds_global_model_is_exported_and_scored_on_the_servers_holdout(fleet):
    """The .tflite holds the global arrays; the TFLite interpreter scores it on the server's
    holdout as the server did on the C core."""
    server = FleetServer(replace(fleet, server="none"))
    layout = server.layout
    arrays = {n: a.copy() for n, a in layout.initial_arrays().items()}
    arrays["op29.bias"][0] += 30_000
    arrays["op26.weights"][:, 0] = 5
    before = server._after_round(0, to_record(layout.initial_arrays()))  # the blob's own
    assert server.exported == []
    after = server._after_round(1, to_record(arrays))
    assert server.exported == [str(fleet.out / "round-1.tflite")]
    back = tflite_arrays(layout, fleet.out / "round-1.tflite")
    assert {n: a.tobytes() for n, a in back.items()} == \
        {n: a.tobytes() for n, a in arrays.items()}
    xs, ys = client_split(fleet, "none", "holdout")
    assert after["accuracy"] == evaluate_tflite(fleet.out / "round-1.tflite", xs, ys)["accuracy"]
    source = fleet.training_blob().source
    assert before["accuracy"] == evaluate_tflite(source, xs, ys)["accuracy"]
    assert server.server_accuracy == {0: before["accuracy"], 1: after["accuracy"]}
