"""Pipelined map-state calls: the same requests as the public calls, answers read in order."""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

import pyspark.sql.streaming.proto.StateMessage_pb2 as messages
import pytest
from pyspark.errors import PySparkRuntimeError

from streaming_app.structured import state_calls
from streaming_app.structured.state_calls import CHUNK, get_values, pipelined, update_values


class FakeServer:
    """The state server's side of the socket: answers each framed request once it is flushed."""

    def __init__(self, store: dict[str, str]) -> None:
        self.store = store
        self.sockfile = self
        self.pending = io.BytesIO()
        self.answers: list[tuple[int, str, bytes]] = []
        self.flushes: list[int] = []  # requests in each flush
        self.most_unread = 0  # answers waiting to be read, at most

    # the client's sockfile
    def write(self, data: bytes) -> None:
        self.pending.write(data)

    def flush(self) -> None:
        data, count = self.pending.getvalue(), 0
        self.pending = io.BytesIO()
        while data:
            version, length = struct.unpack("!ii", data[:8])
            assert version == 0
            request = messages.StateRequest.FromString(data[8 : 8 + length])
            data = data[8 + length :]
            self.answers.append(self.answer(request.stateVariableRequest.mapStateCall))
            count += 1
        self.flushes.append(count)
        self.most_unread = max(self.most_unread, len(self.answers))

    def answer(self, call: Any) -> tuple[int, str, bytes]:
        assert call.stateName == "total"
        if call.HasField("getValue"):
            word = pickle.loads(call.getValue.userKey)[0]
            found = self.store.get(word)
            return 0, "", b"" if found is None else pickle.dumps((found,))
        word = pickle.loads(call.updateValue.userKey)[0]
        if word == "refused":
            return 1, "no space left", b""
        self.store[word] = pickle.loads(call.updateValue.value)[0]
        return 0, "", b""

    # the rest of StatefulProcessorApiClient that state_calls uses
    def _serialize_to_bytes(self, schema: Any, data: tuple[Any, ...]) -> bytes:
        return pickle.dumps(data)

    def _deserialize_from_bytes(self, value: bytes) -> Any:
        return pickle.loads(value)

    def _receive_proto_message(self) -> tuple[int, str, bytes]:
        return self.answers.pop(0)


class FakeMapState:
    def __init__(self, server: FakeServer) -> None:
        self._stateName = "total"
        self._mapStateClient = self
        self._stateful_processor_api_client = server
        self.user_key_schema = self.value_schema = None


def test_the_pyspark_the_tests_run_on_takes_the_pipelined_calls() -> None:
    # Another PySpark makes the public calls one by one: upgrading it shows up here.
    assert pipelined()


def test_values_come_back_in_order_a_chunk_of_requests_per_flush() -> None:
    store = {f"w{i}": str(i) for i in range(0, 600, 2)}
    server = FakeServer(store)
    words = [(f"w{i}",) for i in range(600)]
    values = get_values(FakeMapState(server), words)
    assert values == [(str(i),) if i % 2 == 0 else None for i in range(600)]
    assert server.flushes == [CHUNK, CHUNK, 600 - 2 * CHUNK]
    assert server.most_unread == CHUNK and not server.answers


def test_updates_are_applied_in_order_and_a_refusal_is_an_error() -> None:
    server = FakeServer({})
    update_values(FakeMapState(server), [(("a",), ("1",)), (("b",), ("2",)), (("a",), ("3",))])
    assert server.store == {"a": "3", "b": "2"}
    with pytest.raises(PySparkRuntimeError, match="no space left"):
        update_values(FakeMapState(server), [(("refused",), ("1",))])


def test_other_pyspark_versions_make_the_public_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_calls, "PIPELINED_VERSIONS", ("0.0",))
    calls: list[tuple[Any, ...]] = []

    class PublicMapState:
        def getValue(self, key: tuple[str]) -> tuple[str] | None:  # noqa: N802 (Spark's name)
            calls.append(("get", key))
            return ("5",) if key == ("a",) else None

        def updateValue(self, key: tuple[str], value: tuple[str]) -> None:  # noqa: N802
            calls.append(("update", key, value))

    state = PublicMapState()
    assert get_values(state, [("a",), ("b",)]) == [("5",), None]
    update_values(state, [(("a",), ("6",))])
    assert calls == [("get", ("a",)), ("get", ("b",)), ("update", ("a",), ("6",))]


def test_a_bucket_s_pairs_update_its_words_totals_through_the_map_state() -> None:
    from pyspark.sql import Row

    from streaming_app.structured.processor import RunningTotals

    server = FakeServer({"a": "10"})

    class Handle:
        def getMapState(self, name: str, key_schema: Any, value_schema: Any) -> Any:  # noqa: N802
            assert name == "total"
            return FakeMapState(server)

    processor = RunningTotals("wordcount")
    processor.init(Handle())  # type: ignore[arg-type]
    pairs = [Row(key="a", value="2"), Row(key="b", value="1"), Row(key="a", value="3")]
    out = list(processor.handleInputRows((7,), iter(pairs), None))
    assert [(row.key, row.total) for row in out] == [("a", "15"), ("b", "1")]
    assert server.store == {"a": "15", "b": "1"}
