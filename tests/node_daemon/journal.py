"""Reading a daemon's event journal over gRPC, up to where it stands now."""

from __future__ import annotations

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc


def events_after(stub: pb_grpc.NodeServiceStub, after_seq: int = 0) -> list[pb.Event]:
    """The journal's events after `after_seq`, up to the newest it holds now.

    StreamEvents replays and then waits for more: reading stops at the newest seq
    ListAlerts reports, so the call returns instead of waiting for an event to come.
    """
    newest = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).last_seq
    if newest <= after_seq:
        return []
    events: list[pb.Event] = []
    stream = stub.StreamEvents(pb.StreamEventsRequest(after_seq=after_seq), timeout=10)
    for event in stream:
        events.append(event)
        if event.seq >= newest:
            stream.cancel()
            break
    return events
