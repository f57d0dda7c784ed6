"""A generic client that knows only server reflection can explore and call the daemon."""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from tests.conftest import DaemonFactory


def test_reflection_lists_service_and_streams_samples(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=2)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = database.get_services()
        assert "gpufleet.v1.NodeService" in services
        assert "grpc.health.v1.Health" in services
        pool = descriptor_pool.DescriptorPool(database)
        service = pool.FindServiceByName("gpufleet.v1.NodeService")
        method = service.methods_by_name["StreamSamples"]
        assert method.server_streaming
        request_class = message_factory.GetMessageClass(method.input_type)
        reply_class = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_stream(
            "/gpufleet.v1.NodeService/StreamSamples",
            request_serializer=request_class.SerializeToString,
            response_deserializer=reply_class.FromString,
        )
        stream = call(request_class(), timeout=10)
        batch = next(stream)
        stream.cancel()
    assert len(batch.gpus) == 2
    assert batch.gpus[1].index == 1
