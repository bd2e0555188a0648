"""Many map-state calls in one exchange with Spark's state server, on the executors.

A transformWithState processor in Python reaches its state through a socket to the JVM's
state server, one request and one answer per call (`MapState.getValue`, `updateValue`).
At tens of thousands of keys a micro-batch the round trips, not the work, set the pace.
`get_values` and `update_values` write up to `CHUNK` requests before reading their
answers, which the server sends in order: the same requests and answers as the public
calls make, without a wait between them.

That framing is PySpark's own (`StatefulProcessorApiClient._send_proto_message`), used
here through names that are not public API: it is used only on the PySpark versions it was
tested with (`PIPELINED_VERSIONS`); any other version makes the public calls, one by one,
with the same results.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from pyspark.errors import PySparkRuntimeError

# Requests written before their answers are read: small enough (about 100 bytes each) that
# neither side's socket buffer can fill while the other is still writing.
CHUNK = 256
PIPELINED_VERSIONS = ("4.3",)  # major.minor of PySpark this module's framing was tested on


def pipelined() -> bool:
    """Whether this PySpark's state client is one the pipelined calls were tested with."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2]) in PIPELINED_VERSIONS


def get_values(state: Any, keys: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...] | None]:
    """`state.getValue(key)` for each key, in order (None: the key has no value)."""
    if not pipelined():
        return [state.getValue(key) for key in keys]
    client = state._mapStateClient
    api = client._stateful_processor_api_client
    values: list[tuple[Any, ...] | None] = []
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        _send(api, [_get_request(state, client, key) for key in chunk])
        for _ in chunk:
            status, error, value = api._receive_proto_message()
            if status != 0:
                raise PySparkRuntimeError(f"Error getting value: {error}")
            values.append(None if len(value) == 0 else tuple(api._deserialize_from_bytes(value)))
    return values


def update_values(state: Any, items: Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]]) -> None:
    """`state.updateValue(key, value)` for each (key, value), in order."""
    if not pipelined():
        for key, value in items:
            state.updateValue(key, value)
        return
    client = state._mapStateClient
    api = client._stateful_processor_api_client
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        _send(api, [_update_request(state, client, key, value) for key, value in chunk])
        for _ in chunk:
            status, error, _value = api._receive_proto_message()
            if status != 0:
                raise PySparkRuntimeError(f"Error updating map state value: {error}")


def _send(api: Any, messages: list[bytes]) -> None:
    """Frame each message as `_send_proto_message` does, and flush once."""
    for message in messages:
        # The message format's version (0), the length, the message.
        api.sockfile.write(struct.pack("!ii", 0, len(message)))
        api.sockfile.write(message)
    api.sockfile.flush()


def _get_request(state: Any, client: Any, key: tuple[Any, ...]) -> bytes:
    import pyspark.sql.streaming.proto.StateMessage_pb2 as messages

    key_bytes = client._stateful_processor_api_client._serialize_to_bytes(
        client.user_key_schema, key
    )
    call = messages.MapStateCall(
        stateName=state._stateName, getValue=messages.GetValue(userKey=key_bytes)
    )
    return _request(call)


def _update_request(state: Any, client: Any, key: tuple[Any, ...], value: tuple[Any, ...]) -> bytes:
    import pyspark.sql.streaming.proto.StateMessage_pb2 as messages

    api = client._stateful_processor_api_client
    update = messages.UpdateValue(
        userKey=api._serialize_to_bytes(client.user_key_schema, key),
        value=api._serialize_to_bytes(client.value_schema, value),
    )
    return _request(messages.MapStateCall(stateName=state._stateName, updateValue=update))


def _request(call: Any) -> bytes:
    import pyspark.sql.streaming.proto.StateMessage_pb2 as messages

    variable = messages.StateVariableRequest(mapStateCall=call)
    return bytes(messages.StateRequest(stateVariableRequest=variable).SerializeToString())
