"""The metric catalogue agrees with the proto, the daemon's reading type, the wire and /metrics.

`gpufleet.v1.gpu_metrics` is the one place a GPU metric is described; these tests
fail when something derived from it, or the proto it mirrors, drifts away.
"""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor

from gpufleet.v1 import gpu_metrics
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import (
    BY_FIELD,
    DCGM_FB_FREE,
    DCGM_XID_ERRORS,
    GPU_METRICS,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    GpuMetric,
    shown_metrics,
)
from node_daemon.backends.readings import AnyMetric, GpuHealth, GpuReading, GpuStatic
from node_daemon.metrics.dcgm import DcgmLabels, render
from node_daemon.sampling.wire import sample_message

_FLOAT_TYPES = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}
_INT_TYPES = {
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}  # fmt: skip
SAMPLE_FIELDS = pb.GpuSample.DESCRIPTOR.fields


def optional_number_fields() -> dict[str, type]:
    """GpuSample's proto3 `optional` numbers, in field order: name → Python kind."""
    return {
        field.name: float if field.type in _FLOAT_TYPES else int
        for field in SAMPLE_FIELDS
        if field.has_presence and not field.is_repeated and field.type in _FLOAT_TYPES | _INT_TYPES
    }


def example_value(metric: AnyMetric) -> int | float:
    """A value of the metric's kind that every proto number type can carry, distinct per metric."""
    position = GPU_METRICS.index(metric)
    return position + 1 if metric.kind is int else position + 0.5


def full_reading(index: int = 0) -> GpuReading:
    return GpuReading.of(index, {metric: example_value(metric) for metric in GPU_METRICS})


# ---------------------------------------------------------------- catalogue and proto


def test_the_catalogue_is_the_samples_optional_numbers_in_field_order() -> None:
    assert [metric.field for metric in GPU_METRICS] == list(optional_number_fields())


def test_each_metrics_kind_is_its_proto_fields_type() -> None:
    kinds = optional_number_fields()
    assert {metric.field: metric.kind for metric in GPU_METRICS} == kinds


def test_no_other_sample_field_is_an_optional_number() -> None:
    """A new optional number in node.proto without a catalogue entry fails here by name."""
    others = [field for field in SAMPLE_FIELDS if field.name not in BY_FIELD]
    assert {field.name for field in others} == {
        "index", "health", "error", "xids", "processes", "nvlink_down_links", "condition",
        "mig_instances", "xid_counts",
    }  # fmt: skip
    assert not any(field.has_presence and not field.message_type for field in others)


def test_by_field_and_the_module_constants_name_each_metric_once() -> None:
    assert list(BY_FIELD) == [metric.field for metric in GPU_METRICS]
    constants = {
        name: value for name, value in vars(gpu_metrics).items() if isinstance(value, GpuMetric)
    }
    assert sorted(constants.values(), key=GPU_METRICS.index) == list(GPU_METRICS)
    assert all(name == metric.field.upper() for name, metric in constants.items())


def test_every_metric_says_what_it_is() -> None:
    for metric in GPU_METRICS:
        assert metric.description.strip(), metric.field
        assert metric.kind in (int, float), metric.field
        assert metric.unit == metric.unit.strip(), metric.field


# ---------------------------------------------------------------- nvidia-smi, dcgm, console


def test_nvidia_smi_names_are_given_and_distinct() -> None:
    names = [metric.smi.name for metric in GPU_METRICS if metric.smi is not None]
    assert all(name.strip() and " " not in name for name in names)
    assert len(names) == len(set(names))
    assert all(metric.smi.scale > 0 for metric in GPU_METRICS if metric.smi is not None)


def test_dcgm_names_are_distinct_typed_and_explained() -> None:
    families = [m.dcgm for m in GPU_METRICS if m.dcgm is not None] + [DCGM_FB_FREE, DCGM_XID_ERRORS]
    names = [family.name for family in families]
    assert len(names) == len(set(names)), names
    for family in families:
        assert family.name.startswith("DCGM_FI_"), family.name
        assert family.type in ("gauge", "counter"), family.name
        assert family.help.strip() and family.scale > 0, family.name


def test_dcgm_counters_are_the_catalogues_running_totals() -> None:
    counters = {m.field for m in GPU_METRICS if m.dcgm is not None and m.dcgm.type == "counter"}
    assert counters == {
        "ecc_corrected_total", "ecc_uncorrected_total", "energy_j", "pcie_replay_total",
        "remapped_rows_correctable", "remapped_rows_uncorrectable", "retired_pages_sbe",
        "retired_pages_dbe", "nvlink_crc_flit_errors_total", "nvlink_crc_data_errors_total",
        "nvlink_replay_errors_total", "nvlink_recovery_errors_total",
        "retired_pages_pending",  # dcgm-exporter's type, though NVML gives a 0/1 status
    }  # fmt: skip


def test_shown_metrics_have_labels_and_distinct_plot_colours() -> None:
    shown = shown_metrics()
    assert [m.field for m in shown] == [m.field for m in GPU_METRICS if m.shown is not None]
    assert all(m.shown is not None and m.shown.label.strip() for m in shown)
    colours = [m.shown.plot_colour for m in shown if m.shown and m.shown.plot_colour is not None]
    assert len(colours) == len(set(colours))


# ---------------------------------------------------------------- the daemon's reading type


@pytest.mark.parametrize("metric", GPU_METRICS, ids=lambda metric: metric.field)
def test_the_reading_takes_each_catalogue_field_and_gives_it_back(metric: AnyMetric) -> None:
    value = example_value(metric)

    reading = GpuReading(index=0, **{metric.field: value})

    assert reading[metric] == value and type(reading[metric]) is metric.kind
    assert [other for other in GPU_METRICS if reading[other] is not None] == [metric]
    assert reading == GpuReading.of(0, {metric: value})


@pytest.mark.parametrize(
    "name", ["processes", "temp_gpu", "TEMP_GPU_C", "memory_total_bytes", "clocks_max_sm_mhz"]
)
def test_the_reading_rejects_a_field_outside_the_catalogue(name: str) -> None:
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
        GpuReading(index=0, **{name: 1})


def test_the_reading_rejects_a_metric_outside_the_catalogue() -> None:
    hypothetical = GpuMetric("clocks_max_sm_mhz", int, "MHz", "Highest SM clock.")

    with pytest.raises(TypeError, match="clocks_max_sm_mhz"):
        GpuReading.of(0, {hypothetical: 2100})
    with pytest.raises(KeyError):
        full_reading()[hypothetical]


@pytest.mark.parametrize(
    ("field", "value"),
    [("mem_used_bytes", 1.5), ("pstate", True), ("temp_gpu_c", "61"), ("power_w", b"1")],
)
def test_the_reading_rejects_a_value_of_the_wrong_kind(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=field):
        GpuReading(index=0, **{field: value})


def test_an_int_is_a_float_metrics_value_as_it_is() -> None:
    reading = GpuReading(index=0, temp_gpu_c=61)
    assert reading[gpu_metrics.TEMP_GPU_C] == 61 and reading == GpuReading(0, temp_gpu_c=61.0)


def test_readings_are_values() -> None:
    reading = full_reading()
    assert reading == full_reading() and hash(reading) == hash(full_reading())
    assert reading != full_reading(index=1)
    assert reading != reading.replace(xids=(79,)) and reading.replace(xids=(79,)).xids == (79,)
    assert reading.replace(health=GpuHealth.ERROR, error="x").error == "x"
    assert list(reading.replace(error="x").available()) == list(reading.available())
    with pytest.raises(AttributeError):
        reading.index = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        reading.colour = "red"  # type: ignore[attr-defined]


def test_the_repr_shows_what_is_set() -> None:
    reading = GpuReading(index=2, health=GpuHealth.ERROR, error="e", xids=(79,), power_w=70.5)
    assert repr(reading) == (
        "GpuReading(index=2, health=GpuHealth.ERROR, error='e', xids=(79,), power_w=70.5)"
    )
    assert repr(GpuReading(index=0)) == "GpuReading(index=0)"


# ---------------------------------------------------------------- the wire and /metrics


def round_trip(reading: GpuReading) -> pb.GpuSample:
    return pb.GpuSample.FromString(sample_message(reading, ()).SerializeToString())


def set_metrics(sample: pb.GpuSample) -> dict[str, object]:
    return {m.field: getattr(sample, m.field) for m in GPU_METRICS if sample.HasField(m.field)}


def test_the_wire_carries_every_metric_a_reading_has() -> None:
    sample = round_trip(full_reading())
    assert set_metrics(sample) == {m.field: example_value(m) for m in GPU_METRICS}


def test_the_wire_leaves_unset_what_a_reading_lacks() -> None:
    assert set_metrics(round_trip(GpuReading(index=3, xids=(48,)))) == {}
    some = GPU_METRICS[::3]
    sample = round_trip(GpuReading.of(0, {metric: example_value(metric) for metric in some}))
    assert set_metrics(sample) == {m.field: example_value(m) for m in some}


def test_dcgm_renders_a_family_for_each_metric_with_a_dcgm_name_in_its_unit() -> None:
    static = GpuStatic(0, "GPU-aaa", "NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0")
    reading = full_reading()

    text = render([reading], {0: static}, {0: 79}, DcgmLabels("node-1"))

    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    dcgm = [metric for metric in GPU_METRICS if metric.dcgm is not None]
    assert families == [
        *(m.dcgm.name for m in dcgm if m.dcgm),
        DCGM_FB_FREE.name,
        DCGM_XID_ERRORS.name,
    ]
    values = {
        line.split("{")[0]: float(line.split()[-1]) for line in text.splitlines() if "{" in line
    }
    for metric in dcgm:
        assert metric.dcgm is not None
        assert values[metric.dcgm.name] == pytest.approx(example_value(metric) * metric.dcgm.scale)
    free = (reading[MEM_TOTAL_BYTES] or 0) - (reading[MEM_USED_BYTES] or 0)
    assert values[DCGM_FB_FREE.name] == pytest.approx(free * DCGM_FB_FREE.scale)
    assert values[DCGM_XID_ERRORS.name] == 79
