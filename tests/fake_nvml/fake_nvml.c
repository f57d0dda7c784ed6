/*
 * A fake libnvidia-ml.so.1: the subset of the NVML C API that gpufleet's NvmlBackend
 * (through nvidia-ml-py's ctypes bindings) calls, driven by a plain-text state file.
 *
 * Build:  gcc -shared -fPIC -O2 -pthread -Wl,-soname,libnvidia-ml.so.1 \
 *             -o DIR/libnvidia-ml.so.1 fake_nvml.c
 *
 * The state file is named by the environment variable FAKE_NVML_STATE. It is read on
 * nvmlInit and re-read by any later call when it changed (inode, size or mtime), so a
 * test may rewrite it (atomically: write a temp file, rename) while NVML is open.
 * No FAKE_NVML_STATE, or no such file: one GPU with the defaults below.
 *
 * Format: one `key = value` per line; blank lines and lines starting with `#` are
 * ignored. Every value may instead be
 *     unsupported      the call that serves it returns NVML_ERROR_NOT_SUPPORTED (3)
 *     error:CODE       the call that serves it returns the nvmlReturn_t CODE
 *
 * Node keys (default):
 *     init_error = 0          nvmlInit* returns this code (9 = DRIVER_NOT_LOADED ...)
 *     query_error = 0         every call except init/shutdown/errorString returns it
 *                             (the driver went away under a running daemon)
 *     driver_version = 550.54.15
 *     cuda_version = 12040    as nvmlSystemGetCudaDriverVersion returns it (12.4)
 *     gpu_count = 1           at most 16
 *     event_set = ok          `unsupported`: nvmlEventSetCreate fails
 *
 * GPU keys, `gpu.N.FIELD = value` (default):        served by
 *     lost = 0                 1: every per-device call, and nvmlDeviceGetHandleByIndex,
 *                              returns NVML_ERROR_GPU_IS_LOST (15)
 *     name = NVIDIA H100 80GB HBM3                    nvmlDeviceGetName
 *     uuid = GPU-00000000-0000-4000-8000-00000000000N nvmlDeviceGetUUID
 *     serial = 165000000000N                          nvmlDeviceGetSerial
 *     pci_bus_id = 00000000:1N:00.0                   nvmlDeviceGetPciInfo_v3
 *     vbios = 96.00.74.00.01                          nvmlDeviceGetVbiosVersion
 *     memory_total = 85520809984   bytes              nvmlDeviceGetMemoryInfo (+ _v2)
 *     memory_used = 536870912      bytes              nvmlDeviceGetMemoryInfo (+ _v2)
 *     power_limit = 700000     mW      nvmlDeviceGetEnforcedPowerLimit, ...PowerManagementLimit
 *                              (a limit set through nvmlDeviceSetPowerManagementLimit
 *                              replaces it until fakeNvmlReset, as a real limit stays
 *                              set until the driver reloads)
 *     power_limit_default = 700000  mW           nvmlDeviceGetPowerManagementDefaultLimit
 *     power_limit_min = 200000, power_limit_max = 700000   mW
 *                                         nvmlDeviceGetPowerManagementLimitConstraints;
 *                              nvmlDeviceSetPowerManagementLimit refuses a limit
 *                              outside them with NVML_ERROR_INVALID_ARGUMENT (2)
 *     set_power_limit = ok     `no_permission`: nvmlDeviceSetPowerManagementLimit answers
 *                              NVML_ERROR_NO_PERMISSION (4), as for a non-root caller
 *     temp_shutdown = 95       C                      nvmlDeviceGetTemperatureThreshold
 *     temp_slowdown = 90       C                      nvmlDeviceGetTemperatureThreshold
 *     util_gpu = 0, util_mem = 0   percent            nvmlDeviceGetUtilizationRates
 *     temp = 40                C                      nvmlDeviceGetTemperature
 *     memory_temp = 45         C      nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)
 *     power = 70000            mW                     nvmlDeviceGetPowerUsage
 *     fan = 30                 percent                nvmlDeviceGetFanSpeed (+ _v2)
 *     sm_clock = 1980, mem_clock = 2619   MHz         nvmlDeviceGetClockInfo
 *     pcie_tx = 0, pcie_rx = 0     KB/s               nvmlDeviceGetPcieThroughput
 *     pstate = 0                                      nvmlDeviceGetPerformanceState
 *     throttle_reasons = 0     bit mask    nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons
 *     ecc_corrected = 0, ecc_uncorrected = 0          nvmlDeviceGetTotalEccErrors
 *     energy = 1000000         mJ                     nvmlDeviceGetTotalEnergyConsumption
 *     pcie_replay = 0                                 nvmlDeviceGetPcieReplayCounter
 *     remapped_rows = ok       `unsupported`: the whole call fails (pre-Ampere GPUs)
 *     remapped_rows_correctable = 0, remapped_rows_uncorrectable = 0,
 *     remapped_rows_pending = 0, remapped_rows_failure = 0 (0/1)
 *                                                     nvmlDeviceGetRemappedRows
 *     retired_pages = unsupported   the default H100 remaps rows instead (Ampere and
 *                              later answer NOT_SUPPORTED); `ok` models a GPU that
 *                              retires pages (Volta, Turing)
 *     retired_pages_sbe = 0, retired_pages_dbe = 0   pages retired for multiple
 *                              single-bit / a double-bit ECC error; the fake makes
 *                              up their addresses       nvmlDeviceGetRetiredPages (+ _v2)
 *                              (with pageCount too small: INSUFFICIENT_SIZE and the
 *                              count, as the real one)
 *     retired_pages_pending = 0   (0/1)         nvmlDeviceGetRetiredPagesPendingStatus
 *     nvlink_links = 0         NVLink links the GPU has: 0 (the default, a GPU without
 *                              NVLink) answers NOT_SUPPORTED for every link; a link
 *                              number >= nvlink_links (or >= NVML_NVLINK_MAX_LINKS,
 *                              36) answers NVML_ERROR_INVALID_ARGUMENT
 *     nvlink.L.state = up      `up` or `down` (or unsupported, error:N) for link L
 *                                                     nvmlDeviceGetNvLinkState
 *     nvlink.L.replay, nvlink.L.recovery, nvlink.L.crc_flit, nvlink.L.crc_data,
 *     nvlink.L.ecc_data = 0    link L's counters    nvmlDeviceGetNvLinkErrorCounter
 *     recovery_action = 0      0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain
 *                              and reset
 *                  nvmlDeviceGetFieldValues(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, 230)
 *     mig = 0                  MIG mode now: 1 enabled; `unsupported`: not MIG-capable
 *                                                     nvmlDeviceGetMigMode
 *     mig_pending = (mig)      the mode after the next GPU reset
 *     max_mig = 7              (at most 8)            nvmlDeviceGetMaxMigDeviceCount
 *     mig.K.profile = 1g.10gb  K = 0..max_mig-1: a MIG device at index K (only while
 *                              mig = 1); an index without one answers NOT_FOUND (6)
 *                                                nvmlDeviceGetMigDeviceHandleByIndex
 *     mig.K.gi = K, mig.K.ci = 0     nvmlDeviceGetGpuInstanceId / ...ComputeInstanceId
 *     mig.K.uuid = MIG-0000000N-000K-4000-8000-000000000000   nvmlDeviceGetUUID
 *     mig.K.memory_total = (the profile's "Ngb", in GiB), mig.K.memory_used = 0
 *                                                     nvmlDeviceGetMemoryInfo (+ _v2)
 *     mig.K.process.J = PID MEM [compute|graphics]   as process.K, on MIG device K;
 *                              the GPU's own handle lists them too, with their GPU
 *                              and compute instance ids, as a real driver does
 *
 *     A MIG device handle is told apart from a GPU handle: nvmlDeviceIsMigDeviceHandle,
 *     nvmlDeviceGetDeviceHandleFromMigDeviceHandle; its name is "<GPU name> MIG
 *     <profile>". Calls the fake serves only for whole GPUs answer NOT_SUPPORTED for
 *     a MIG handle; a handle whose MIG device is gone answers INVALID_ARGUMENT.
 *     events = ok              `unsupported`: nvmlDeviceRegisterEvents fails
 *     processes = ok           `unsupported`: nvmlDeviceGet*RunningProcesses fail
 *     process.K = PID MEM [compute|graphics]          nvmlDeviceGet*RunningProcesses
 *                              MEM in bytes, or `na` (NVML_VALUE_NOT_AVAILABLE);
 *                              default kind compute; K is any distinct label
 *     process_util = ok        `unsupported` (or error:N): nvmlDeviceGetProcessUtilization
 *                              fails with it
 *     process_util.K = PID SM [TIMESTAMP]    a sample nvmlDeviceGetProcessUtilization
 *                              returns: SM percent, TIMESTAMP in microseconds (default:
 *                              the time of the call, so every call returns it); only
 *                              samples newer than the caller's lastSeenTimeStamp are
 *                              returned, none at all answers NVML_ERROR_NOT_FOUND (6)
 *     xids = 79 13 ...         Xid critical-error events, in order. The list only
 *                              grows: each entry the fake has not seen before is
 *                              queued once on every event set that has this GPU
 *                              registered at that moment; nvmlEventSetWait pops
 *                              them and returns NVML_ERROR_TIMEOUT when none is left
 *                              (immediately: the timeout is not waited for).
 *
 * Besides NVML, the library exports fakeNvmlReset(): forget init refcount, event
 * sets, Xids seen and power limits set, so each test starts from a clean library; and
 * fakeNvmlInitCount(): nvmlInit calls not yet matched by nvmlShutdown.
 */

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_NVLINK_MAX_LINKS 36
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_EVENT_TYPE_XID 8ULL
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)
#define NVML_MEMORY_V2 ((unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

#define MAX_GPUS 16
#define MAX_ENTRIES 4096
#define KEY_LEN 64
#define VAL_LEN 256
#define MAX_SETS 16
#define QUEUE_LEN 256
#define MAX_PROCS 128
#define MAX_MIG 8

/* A GPU handle has mig = -1; a MIG device handle has its index on the GPU. */
struct nvmlDevice_st { int index; int mig; };
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t; /* v3 has the same layout */
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    signed int siVal;
} nvmlValue_t;
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
} nvmlEventData_v1_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

struct queued_xid { int gpu; unsigned long long xid; };
struct nvmlEventSet_st {
    int used;
    unsigned long long types[MAX_GPUS];
    struct queued_xid queue[QUEUE_LEN];
    int head, count;
};
typedef struct nvmlEventSet_st *nvmlEventSet_t;

struct entry { char key[KEY_LEN]; char val[VAL_LEN]; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry entries[MAX_ENTRIES];
static int n_entries;
static struct stat loaded_stat;
static int loaded;
static int init_refcount;
static int xids_seen[MAX_GPUS];
static struct nvmlDevice_st devices[MAX_GPUS];
static struct nvmlDevice_st mig_devices[MAX_GPUS][MAX_MIG];
static unsigned int power_limit_set[MAX_GPUS]; /* mW; 0: none set */
static struct nvmlEventSet_st event_sets[MAX_SETS];

/* ------------------------------------------------------------------ state file */

static char *trim(char *s)
{
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static void parse_line(char *line)
{
    char *eq = strchr(line, '=');
    char *key, *val;
    if (line[0] == '#' || eq == NULL || n_entries >= MAX_ENTRIES)
        return;
    *eq = '\0';
    key = trim(line);
    val = trim(eq + 1);
    if (*key == '\0')
        return;
    snprintf(entries[n_entries].key, KEY_LEN, "%s", key);
    snprintf(entries[n_entries].val, VAL_LEN, "%s", val);
    n_entries++;
}

static const char *lookup(const char *key)
{
    int i;
    for (i = n_entries - 1; i >= 0; i--) /* the last line for a key wins */
        if (strcmp(entries[i].key, key) == 0)
            return entries[i].val;
    return NULL;
}

static const char *gpu_lookup(int gpu, const char *field)
{
    char key[KEY_LEN];
    snprintf(key, sizeof key, "gpu.%d.%s", gpu, field);
    return lookup(key);
}

static void queue_xid(int gpu, unsigned long long xid)
{
    int s;
    for (s = 0; s < MAX_SETS; s++) {
        struct nvmlEventSet_st *set = &event_sets[s];
        if (!set->used || !(set->types[gpu] & NVML_EVENT_TYPE_XID) || set->count >= QUEUE_LEN)
            continue;
        set->queue[(set->head + set->count) % QUEUE_LEN] = (struct queued_xid){gpu, xid};
        set->count++;
    }
}

/* Queue the Xids of `gpu.N.xids` beyond those already seen. */
static void deliver_new_xids(void)
{
    int gpu;
    for (gpu = 0; gpu < MAX_GPUS; gpu++) {
        const char *list = gpu_lookup(gpu, "xids");
        char *p, *end;
        int i = 0;
        if (list == NULL)
            list = "";
        p = (char *)list;
        for (;;) {
            unsigned long long xid = strtoull(p, &end, 10);
            if (end == p)
                break;
            if (i >= xids_seen[gpu])
                queue_xid(gpu, xid);
            i++;
            p = end;
        }
        xids_seen[gpu] = i;
    }
}

static void load_state(const char *path, const struct stat *st)
{
    char line[KEY_LEN + VAL_LEN + 8];
    FILE *f = fopen(path, "r");
    n_entries = 0;
    if (f != NULL) {
        while (fgets(line, sizeof line, f) != NULL)
            parse_line(trim(line));
        fclose(f);
    }
    loaded_stat = *st;
    loaded = 1;
    deliver_new_xids();
}

/* Re-read the state file if it changed since the last read. Call with `lock` held. */
static void refresh(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) {
        if (loaded)
            n_entries = 0;
        memset(&loaded_stat, 0, sizeof loaded_stat);
        loaded = 0;
        return;
    }
    if (loaded && st.st_ino == loaded_stat.st_ino && st.st_dev == loaded_stat.st_dev &&
        st.st_size == loaded_stat.st_size &&
        st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec)
        return;
    load_state(path, &st);
}

/* ------------------------------------------------------------------ values */

/* The error a value stands for (`unsupported`, `error:N`), or NVML_SUCCESS. */
static nvmlReturn_t value_error(const char *val)
{
    if (val == NULL)
        return NVML_SUCCESS;
    if (strcmp(val, "unsupported") == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (strncmp(val, "error:", 6) == 0)
        return (nvmlReturn_t)strtol(val + 6, NULL, 10);
    return NVML_SUCCESS;
}

static const char *default_text(int gpu, const char *field, char *buf, size_t size)
{
    if (strcmp(field, "name") == 0)
        return "NVIDIA H100 80GB HBM3";
    if (strcmp(field, "vbios") == 0)
        return "96.00.74.00.01";
    if (strcmp(field, "uuid") == 0)
        snprintf(buf, size, "GPU-00000000-0000-4000-8000-%012d", gpu);
    else if (strcmp(field, "serial") == 0)
        snprintf(buf, size, "165000000000%d", gpu);
    else if (strcmp(field, "pci_bus_id") == 0)
        snprintf(buf, size, "00000000:%02X:00.0", 0x10 + gpu);
    else
        return NULL;
    return buf;
}

static unsigned long long default_number(const char *field)
{
    static const struct { const char *field; unsigned long long value; } table[] = {
        {"memory_total", 85520809984ULL}, {"memory_used", 536870912ULL},
        {"power_limit", 700000}, {"temp_shutdown", 95}, {"temp_slowdown", 90},
        {"temp", 40}, {"memory_temp", 45}, {"power", 70000}, {"fan", 30},
        {"sm_clock", 1980}, {"mem_clock", 2619}, {"energy", 1000000},
        {"power_limit_default", 700000}, {"power_limit_min", 200000},
        {"power_limit_max", 700000}, {"max_mig", 7},
    };
    size_t i;
    for (i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].field, field) == 0)
            return table[i].value;
    return 0;
}

/* A text field of GPU `gpu` into `out` (a caller's buffer of `size` bytes). */
static nvmlReturn_t gpu_text(int gpu, const char *field, char *out, unsigned int size)
{
    char buf[VAL_LEN];
    const char *val = gpu_lookup(gpu, field);
    nvmlReturn_t err = value_error(val);
    if (err != NVML_SUCCESS)
        return err;
    if (val == NULL)
        val = default_text(gpu, field, buf, sizeof buf);
    if (out == NULL || val == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(val) + 1 > size)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, val, strlen(val) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t number(const char *val, unsigned long long dflt, unsigned long long *out)
{
    nvmlReturn_t err = value_error(val);
    if (err != NVML_SUCCESS)
        return err;
    *out = val == NULL ? dflt : strtoull(val, NULL, 0);
    return NVML_SUCCESS;
}

static nvmlReturn_t gpu_number(int gpu, const char *field, unsigned long long *out)
{
    return number(gpu_lookup(gpu, field), default_number(field), out);
}

static nvmlReturn_t gpu_uint(int gpu, const char *field, unsigned int *out)
{
    unsigned long long value;
    nvmlReturn_t ret;
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(gpu, field, &value);
    if (ret == NVML_SUCCESS)
        *out = (unsigned int)value;
    return ret;
}

static int gpu_count(void)
{
    unsigned long long count = 1;
    if (number(lookup("gpu_count"), 1, &count) != NVML_SUCCESS)
        return -1;
    return count > MAX_GPUS ? MAX_GPUS : (int)count;
}

/* ------------------------------------------------------------------ call gates */

#define LOCKED(expr)                        \
    do {                                    \
        nvmlReturn_t ret_;                  \
        pthread_mutex_lock(&lock);          \
        refresh();                          \
        ret_ = (expr);                      \
        pthread_mutex_unlock(&lock);        \
        return ret_;                        \
    } while (0)

/* Is NVML usable for a query right now? */
/* A key whose value is an nvmlReturn_t: `9`, `error:9` and `unsupported` all work. */
static nvmlReturn_t code_value(const char *key)
{
    const char *val = lookup(key);
    nvmlReturn_t err = value_error(val);
    return err != NVML_SUCCESS ? err : val == NULL ? NVML_SUCCESS : (nvmlReturn_t)atoi(val);
}

static nvmlReturn_t check_system(void)
{
    if (init_refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    return code_value("query_error");
}

static int gpu_is_lost(int gpu)
{
    const char *val = gpu_lookup(gpu, "lost");
    return val != NULL && strcmp(val, "0") != 0;
}

static int is_mig_handle(nvmlDevice_t device)
{
    return device >= &mig_devices[0][0] && device < &mig_devices[0][0] + MAX_GPUS * MAX_MIG;
}

static const char *mig_lookup(int gpu, int mig, const char *field)
{
    char key[KEY_LEN];
    snprintf(key, sizeof key, "gpu.%d.mig.%d.%s", gpu, mig, field);
    return lookup(key);
}

static unsigned int mig_id(int gpu, int mig, const char *field, unsigned long long dflt)
{
    unsigned long long id = dflt;
    number(mig_lookup(gpu, mig, field), dflt, &id);
    return (unsigned int)id;
}

/* The GPU's MIG mode now (0 disabled, 1 enabled), or the error its `mig` key names. */
static nvmlReturn_t mig_mode(int gpu, unsigned long long *mode)
{
    return number(gpu_lookup(gpu, "mig"), 0, mode);
}

static int mig_max(int gpu)
{
    unsigned long long max = 7;
    if (gpu_number(gpu, "max_mig", &max) != NVML_SUCCESS)
        return 0;
    return max > MAX_MIG ? MAX_MIG : (int)max;
}

/* Is there a MIG device `mig` on GPU `gpu` now (MIG enabled, its profile named)? */
static int mig_exists(int gpu, int mig)
{
    unsigned long long mode = 0;
    return mig_mode(gpu, &mode) == NVML_SUCCESS && mode == 1 && mig >= 0 &&
           mig < mig_max(gpu) && mig_lookup(gpu, mig, "profile") != NULL;
}

/* Is `device` a live handle of a GPU that answers? Sets *gpu to its index. */
static nvmlReturn_t check_device(nvmlDevice_t device, int *gpu)
{
    nvmlReturn_t ret = check_system();
    if (ret != NVML_SUCCESS)
        return ret;
    if (is_mig_handle(device))
        return NVML_ERROR_NOT_SUPPORTED; /* a call the fake serves for whole GPUs only */
    if (device < devices || device >= devices + MAX_GPUS || device->index >= gpu_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *gpu = device->index;
    return gpu_is_lost(*gpu) ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

/* Like check_device, but a MIG device handle is fine too: *mig is its index, else -1. */
static nvmlReturn_t check_any_device(nvmlDevice_t device, int *gpu, int *mig)
{
    nvmlReturn_t ret;
    *mig = -1;
    if (!is_mig_handle(device))
        return check_device(device, gpu);
    ret = check_system();
    if (ret != NVML_SUCCESS)
        return ret;
    *gpu = device->index;
    *mig = device->mig;
    if (*gpu >= gpu_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_is_lost(*gpu))
        return NVML_ERROR_GPU_IS_LOST;
    return mig_exists(*gpu, *mig) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Runs `body` under the lock if `check` (a check_*device call) lets the call through, and
 * returns `ret`: the check's error, or what `body` left in it. For the two below. */
#define CHECKED_CALL(check, body)                          \
    do {                                                   \
        nvmlReturn_t ret;                                  \
        pthread_mutex_lock(&lock);                         \
        refresh();                                         \
        ret = (check);                                     \
        if (ret == NVML_SUCCESS) {                         \
            body                                           \
        }                                                  \
        pthread_mutex_unlock(&lock);                       \
        return ret;                                        \
    } while (0)

/* A call served for whole GPUs only; `gpu` is the handle's index. */
#define DEVICE_CALL(device, body)                          \
    do {                                                   \
        int gpu;                                           \
        CHECKED_CALL(check_device((device), &gpu), body);  \
    } while (0)

/* The same for calls that serve MIG device handles too; `mig` is -1 for a GPU handle. */
#define ANY_DEVICE_CALL(device, body)                                 \
    do {                                                              \
        int gpu, mig;                                                 \
        CHECKED_CALL(check_any_device((device), &gpu, &mig), body);   \
    } while (0)

/* ------------------------------------------------------------------ init, system */

void fakeNvmlReset(void)
{
    pthread_mutex_lock(&lock);
    init_refcount = 0;
    memset(event_sets, 0, sizeof event_sets);
    memset(xids_seen, 0, sizeof xids_seen);
    memset(power_limit_set, 0, sizeof power_limit_set);
    n_entries = 0;
    loaded = 0;
    pthread_mutex_unlock(&lock);
}

/* How many nvmlInit calls are not yet matched by nvmlShutdown (for tests). */
int fakeNvmlInitCount(void)
{
    int count;
    pthread_mutex_lock(&lock);
    count = init_refcount;
    pthread_mutex_unlock(&lock);
    return count;
}

static nvmlReturn_t do_init(void)
{
    nvmlReturn_t code = code_value("init_error");
    int i, k;
    if (code != NVML_SUCCESS)
        return code;
    for (i = 0; i < MAX_GPUS; i++) {
        devices[i] = (struct nvmlDevice_st){i, -1};
        for (k = 0; k < MAX_MIG; k++)
            mig_devices[i][k] = (struct nvmlDevice_st){i, k};
    }
    init_refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; LOCKED(do_init()); }
nvmlReturn_t nvmlInit_v2(void) { LOCKED(do_init()); }
nvmlReturn_t nvmlInit(void) { LOCKED(do_init()); }

static nvmlReturn_t do_shutdown(void)
{
    if (init_refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--init_refcount == 0)
        memset(event_sets, 0, sizeof event_sets);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) { LOCKED(do_shutdown()); }

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error (fake NVML)";
    }
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int size)
{
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > size)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t system_text(const char *key, const char *dflt, char *out, unsigned int size)
{
    const char *val = lookup(key);
    nvmlReturn_t ret = check_system();
    if (ret == NVML_SUCCESS)
        ret = value_error(val);
    if (ret != NVML_SUCCESS)
        return ret;
    return copy_text(val == NULL ? dflt : val, out, size);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    LOCKED(system_text("driver_version", "550.54.15", version, length));
}

static nvmlReturn_t cuda_version(int *out)
{
    unsigned long long value = 0;
    nvmlReturn_t ret = check_system();
    if (ret == NVML_SUCCESS && out == NULL)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = number(lookup("cuda_version"), 12040, &value);
    if (ret == NVML_SUCCESS)
        *out = (int)value;
    return ret;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { LOCKED(cuda_version(v)); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { LOCKED(cuda_version(v)); }

static nvmlReturn_t device_count(unsigned int *out)
{
    nvmlReturn_t ret = check_system();
    if (ret == NVML_SUCCESS)
        ret = value_error(lookup("gpu_count"));
    if (ret == NVML_SUCCESS && out == NULL)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        *out = (unsigned int)gpu_count();
    return ret;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { LOCKED(device_count(count)); }
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { LOCKED(device_count(count)); }

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t ret = check_system();
    if (ret != NVML_SUCCESS)
        return ret;
    if (device == NULL || (int)index >= gpu_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_is_lost((int)index))
        return NVML_ERROR_GPU_IS_LOST;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    LOCKED(handle_by_index(i, d));
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    LOCKED(handle_by_index(i, d));
}

/* ------------------------------------------------------------------ static facts */

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE_CALL(device, if (index == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                else *index = (unsigned int)gpu;);
}

/* A MIG device is named after its GPU and profile: "NVIDIA H100 80GB HBM3 MIG 1g.10gb". */
static nvmlReturn_t mig_name(int gpu, int mig, char *out, unsigned int size)
{
    char parent[VAL_LEN], name[2 * VAL_LEN];
    nvmlReturn_t ret = gpu_text(gpu, "name", parent, sizeof parent);
    if (ret != NVML_SUCCESS)
        return ret;
    snprintf(name, sizeof name, "%s MIG %s", parent, mig_lookup(gpu, mig, "profile"));
    return copy_text(name, out, size);
}

static nvmlReturn_t mig_uuid(int gpu, int mig, char *out, unsigned int size)
{
    char uuid[VAL_LEN];
    const char *val = mig_lookup(gpu, mig, "uuid");
    nvmlReturn_t ret = value_error(val);
    if (ret != NVML_SUCCESS)
        return ret;
    if (val == NULL)
        snprintf(uuid, sizeof uuid, "MIG-%08d-%04d-4000-8000-000000000000", gpu, mig);
    return copy_text(val == NULL ? uuid : val, out, size);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    ANY_DEVICE_CALL(device, ret = mig < 0 ? gpu_text(gpu, "name", name, length)
                                          : mig_name(gpu, mig, name, length););
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    ANY_DEVICE_CALL(device, ret = mig < 0 ? gpu_text(gpu, "uuid", uuid, length)
                                          : mig_uuid(gpu, mig, uuid, length););
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    DEVICE_CALL(device, ret = gpu_text(gpu, "serial", serial, length););
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    DEVICE_CALL(device, ret = gpu_text(gpu, "vbios", version, length););
}

static nvmlReturn_t pci_info(int gpu, nvmlPciInfo_t *pci)
{
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    nvmlReturn_t ret;
    if (pci == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    ret = gpu_text(gpu, "pci_bus_id", pci->busId, sizeof pci->busId);
    if (ret != NVML_SUCCESS)
        return ret;
    sscanf(pci->busId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain, bus, dev,
             fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = 0x233010DE;
    pci->pciSubSystemId = 0x16C110DE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device, ret = pci_info(gpu, pci););
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device, ret = pci_info(gpu, pci););
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device, ret = pci_info(gpu, pci););
}

/* The limit now: one set through nvmlDeviceSetPowerManagementLimit, else `power_limit`. */
static nvmlReturn_t power_limit(int gpu, unsigned int *limit)
{
    nvmlReturn_t ret = gpu_uint(gpu, "power_limit", limit);
    if (ret == NVML_SUCCESS && power_limit_set[gpu] != 0)
        *limit = power_limit_set[gpu];
    return ret;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEVICE_CALL(device, ret = power_limit(gpu, limit););
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEVICE_CALL(device, ret = power_limit(gpu, limit););
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, "power_limit_default", limit););
}

static nvmlReturn_t power_constraints(int gpu, unsigned int *min, unsigned int *max)
{
    nvmlReturn_t ret = gpu_uint(gpu, "power_limit_min", min);
    return ret == NVML_SUCCESS ? gpu_uint(gpu, "power_limit_max", max) : ret;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *min,
                                                          unsigned int *max)
{
    DEVICE_CALL(device, ret = power_constraints(gpu, min, max););
}

static nvmlReturn_t set_power_limit(int gpu, unsigned int limit)
{
    const char *permission = gpu_lookup(gpu, "set_power_limit");
    unsigned int min = 0, max = 0, now = 0;
    nvmlReturn_t ret = value_error(permission);
    if (ret == NVML_SUCCESS && permission != NULL && strcmp(permission, "no_permission") == 0)
        ret = NVML_ERROR_NO_PERMISSION;
    if (ret == NVML_SUCCESS)
        ret = power_constraints(gpu, &min, &max);
    if (ret == NVML_SUCCESS)
        ret = power_limit(gpu, &now); /* a GPU without a limit cannot have one set */
    if (ret == NVML_SUCCESS && (limit < min || limit > max))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        power_limit_set[gpu] = limit;
    return ret;
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit)
{
    DEVICE_CALL(device, ret = set_power_limit(gpu, limit););
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold,
                                               unsigned int *temp)
{
    DEVICE_CALL(device, if (threshold == 0) ret = gpu_uint(gpu, "temp_shutdown", temp);
                else if (threshold == 1) ret = gpu_uint(gpu, "temp_slowdown", temp);
                else ret = NVML_ERROR_NOT_SUPPORTED;);
}

/* ------------------------------------------------------------------ readings */

/* A MIG device's memory: its profile's "Ngb" in GiB unless `mig.K.memory_total` says. */
static nvmlReturn_t mig_memory(int gpu, int mig, unsigned long long *total,
                               unsigned long long *used)
{
    unsigned int gigabytes = 0;
    nvmlReturn_t ret;
    const char *profile = mig_lookup(gpu, mig, "profile");
    const char *gb = profile == NULL ? NULL : strchr(profile, '.');
    if (gb != NULL)
        sscanf(gb + 1, "%u", &gigabytes);
    ret = number(mig_lookup(gpu, mig, "memory_total"), gigabytes * 1073741824ULL, total);
    return ret == NVML_SUCCESS ? number(mig_lookup(gpu, mig, "memory_used"), 0, used) : ret;
}

static nvmlReturn_t memory(int gpu, int mig, unsigned long long *total,
                           unsigned long long *used)
{
    nvmlReturn_t ret = mig >= 0 ? mig_memory(gpu, mig, total, used)
                                : gpu_number(gpu, "memory_total", total);
    if (ret == NVML_SUCCESS && mig < 0)
        ret = gpu_number(gpu, "memory_used", used);
    if (ret == NVML_SUCCESS && *used > *total)
        *used = *total;
    return ret;
}

static nvmlReturn_t memory_v1(int gpu, int mig, nvmlMemory_t *mem)
{
    nvmlReturn_t ret;
    if (mem == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = memory(gpu, mig, &mem->total, &mem->used);
    mem->free = ret == NVML_SUCCESS ? mem->total - mem->used : 0;
    return ret;
}

static nvmlReturn_t memory_v2(int gpu, int mig, nvmlMemory_v2_t *mem)
{
    nvmlReturn_t ret;
    if (mem == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mem->version != NVML_MEMORY_V2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    ret = memory(gpu, mig, &mem->total, &mem->used);
    mem->reserved = 0;
    mem->free = ret == NVML_SUCCESS ? mem->total - mem->used : 0;
    return ret;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem)
{
    ANY_DEVICE_CALL(device, ret = memory_v1(gpu, mig, mem););
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem)
{
    ANY_DEVICE_CALL(device, ret = memory_v2(gpu, mig, mem););
}

static nvmlReturn_t utilization(int gpu, nvmlUtilization_t *util)
{
    nvmlReturn_t ret;
    if (util == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_uint(gpu, "util_gpu", &util->gpu);
    return ret == NVML_SUCCESS ? gpu_uint(gpu, "util_mem", &util->memory) : ret;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
    DEVICE_CALL(device, ret = utilization(gpu, util););
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
    DEVICE_CALL(device, ret = sensor == 0 ? gpu_uint(gpu, "temp", temp)
                                          : NVML_ERROR_NOT_SUPPORTED;);
}

static void field_value(int gpu, nvmlFieldValue_t *value)
{
    unsigned int temp = 0;
    value->timestamp = 0;
    value->latencyUsec = 0;
    value->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    value->value.ullVal = 0;
    if (value->fieldId == NVML_FI_DEV_MEMORY_TEMP)
        value->nvmlReturn = gpu_uint(gpu, "memory_temp", &temp);
    else if (value->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
        value->nvmlReturn = gpu_uint(gpu, "recovery_action", &temp);
    else
        value->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    value->value.uiVal = temp;
}

static nvmlReturn_t field_values(int gpu, int count, nvmlFieldValue_t *values)
{
    int i;
    if (values == NULL || count < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < count; i++)
        field_value(gpu, &values[i]);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values)
{
    DEVICE_CALL(device, ret = field_values(gpu, count, values););
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, "power", power););
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, "fan", speed););
}

nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed)
{
    DEVICE_CALL(device, ret = fan == 0 ? gpu_uint(gpu, "fan", speed)
                                       : NVML_ERROR_INVALID_ARGUMENT;);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
    /* 0 graphics, 1 SM, 2 memory, 3 video: graphics and video follow the SM clock */
    DEVICE_CALL(device, ret = gpu_uint(gpu, type == 2 ? "mem_clock" : "sm_clock", clock););
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, counter == 0 ? "pcie_tx" : "pcie_rx", value););
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pstate)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, "pstate", (unsigned int *)pstate););
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons)
{
    DEVICE_CALL(device, if (reasons == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                else ret = gpu_number(gpu, "throttle_reasons", reasons););
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count)
{
    /* volatile and aggregate counters both serve the same value */
    (void)counter_type;
    DEVICE_CALL(device, if (count == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                else ret = gpu_number(gpu, error_type == 0 ? "ecc_corrected" : "ecc_uncorrected",
                                      count););
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    DEVICE_CALL(device, if (energy == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                else ret = gpu_number(gpu, "energy", energy););
}

/* ------------------------------------------------------------------ health signals */

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    DEVICE_CALL(device, ret = gpu_uint(gpu, "pcie_replay", value););
}

static nvmlReturn_t remapped_rows(int gpu, unsigned int *corr, unsigned int *unc,
                                  unsigned int *pending, unsigned int *failure)
{
    nvmlReturn_t ret = value_error(gpu_lookup(gpu, "remapped_rows"));
    if (ret == NVML_SUCCESS)
        ret = gpu_uint(gpu, "remapped_rows_correctable", corr);
    if (ret == NVML_SUCCESS)
        ret = gpu_uint(gpu, "remapped_rows_uncorrectable", unc);
    if (ret == NVML_SUCCESS)
        ret = gpu_uint(gpu, "remapped_rows_pending", pending);
    return ret == NVML_SUCCESS ? gpu_uint(gpu, "remapped_rows_failure", failure) : ret;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    DEVICE_CALL(device, ret = remapped_rows(gpu, corrRows, uncRows, isPending,
                                            failureOccurred););
}

/* Does the GPU retire pages? Only when `retired_pages = ok` (the H100 remaps rows). */
static nvmlReturn_t retires_pages(int gpu)
{
    const char *val = gpu_lookup(gpu, "retired_pages");
    nvmlReturn_t ret = value_error(val);
    if (ret != NVML_SUCCESS)
        return ret;
    return val != NULL && strcmp(val, "ok") == 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* nvmlDeviceGetRetiredPages's protocol: *count too small (0 to ask) → the count and
 * INSUFFICIENT_SIZE; else the addresses (and times, for _v2). Addresses are made up. */
static nvmlReturn_t retired_pages(int gpu, int cause, unsigned int *count,
                                  unsigned long long *addresses, unsigned long long *times)
{
    unsigned long long n = 0;
    unsigned int i;
    nvmlReturn_t ret = retires_pages(gpu);
    if (ret != NVML_SUCCESS)
        return ret;
    if (count == NULL || (cause != 0 && cause != 1))
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(gpu, cause == 0 ? "retired_pages_sbe" : "retired_pages_dbe", &n);
    if (ret != NVML_SUCCESS)
        return ret;
    if (n > *count || (addresses == NULL && n > 0)) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i = 0; i < n; i++) {
        addresses[i] = (cause == 0 ? 0x100000000ULL : 0x200000000ULL) + i * 0x1000ULL;
        if (times != NULL)
            times[i] = 1700000000ULL + i;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *count,
                                       unsigned long long *addresses)
{
    DEVICE_CALL(device, ret = retired_pages(gpu, cause, count, addresses, NULL););
}

nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, int cause, unsigned int *count,
                                          unsigned long long *addresses,
                                          unsigned long long *timestamps)
{
    DEVICE_CALL(device, ret = retired_pages(gpu, cause, count, addresses, timestamps););
}

static nvmlReturn_t retired_pending(int gpu, int *pending)
{
    nvmlReturn_t ret = retires_pages(gpu);
    return ret == NVML_SUCCESS ? gpu_uint(gpu, "retired_pages_pending", (unsigned int *)pending)
                               : ret;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *isPending)
{
    DEVICE_CALL(device, ret = retired_pending(gpu, isPending););
}

/* ------------------------------------------------------------------ NVLink */

static const char *link_lookup(int gpu, unsigned int link, const char *field)
{
    char key[KEY_LEN];
    snprintf(key, sizeof key, "gpu.%d.nvlink.%u.%s", gpu, link, field);
    return lookup(key);
}

/* No NVLink: NOT_SUPPORTED; a link the GPU does not have: INVALID_ARGUMENT. */
static nvmlReturn_t check_link(int gpu, unsigned int link)
{
    unsigned long long links = 0;
    nvmlReturn_t ret = gpu_number(gpu, "nvlink_links", &links);
    if (ret != NVML_SUCCESS)
        return ret;
    if (links == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    return link >= links || link >= NVML_NVLINK_MAX_LINKS ? NVML_ERROR_INVALID_ARGUMENT
                                                          : NVML_SUCCESS;
}

static nvmlReturn_t link_state(int gpu, unsigned int link, int *active)
{
    const char *val = link_lookup(gpu, link, "state");
    nvmlReturn_t ret = check_link(gpu, link);
    if (ret == NVML_SUCCESS)
        ret = value_error(val);
    if (ret == NVML_SUCCESS && active == NULL)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        *active = val == NULL || strcmp(val, "down") != 0; /* NVML_FEATURE_ENABLED: up */
    return ret;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive)
{
    DEVICE_CALL(device, ret = link_state(gpu, link, isActive););
}

static nvmlReturn_t link_counter(int gpu, unsigned int link, int counter,
                                 unsigned long long *value)
{
    static const char *const names[] = {"replay", "recovery", "crc_flit", "crc_data",
                                        "ecc_data"};
    nvmlReturn_t ret = check_link(gpu, link);
    if (ret != NVML_SUCCESS)
        return ret;
    if (counter < 0 || counter >= (int)(sizeof names / sizeof names[0]) || value == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    return number(link_lookup(gpu, link, names[counter]), 0, value);
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, int counter,
                                             unsigned long long *value)
{
    DEVICE_CALL(device, ret = link_counter(gpu, link, counter, value););
}

/* ------------------------------------------------------------------ MIG */

static nvmlReturn_t get_mig_mode(int gpu, unsigned int *current, unsigned int *pending)
{
    unsigned long long now = 0, next = 0;
    nvmlReturn_t ret = mig_mode(gpu, &now);
    if (ret == NVML_SUCCESS && (current == NULL || pending == NULL))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = number(gpu_lookup(gpu, "mig_pending"), now, &next);
    if (ret == NVML_SUCCESS) {
        *current = (unsigned int)now;
        *pending = (unsigned int)next;
    }
    return ret;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    DEVICE_CALL(device, ret = get_mig_mode(gpu, currentMode, pendingMode););
}

static nvmlReturn_t max_mig_count(int gpu, unsigned int *count)
{
    unsigned long long mode = 0;
    nvmlReturn_t ret = mig_mode(gpu, &mode);
    if (ret == NVML_SUCCESS && count == NULL)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        *count = (unsigned int)mig_max(gpu);
    return ret;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    DEVICE_CALL(device, ret = max_mig_count(gpu, count););
}

static nvmlReturn_t mig_handle(int gpu, unsigned int index, nvmlDevice_t *out)
{
    unsigned long long mode = 0;
    nvmlReturn_t ret = mig_mode(gpu, &mode);
    if (ret != NVML_SUCCESS)
        return ret;
    if (mode != 1)
        return NVML_ERROR_NOT_SUPPORTED; /* MIG is off */
    if (out == NULL || index >= (unsigned int)mig_max(gpu))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_exists(gpu, (int)index))
        return NVML_ERROR_NOT_FOUND;
    *out = &mig_devices[gpu][index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    DEVICE_CALL(device, ret = mig_handle(gpu, index, migDevice););
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    ANY_DEVICE_CALL(device, if (isMigDevice == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                    else *isMigDevice = mig >= 0;);
}

/* A MIG device's GPU or compute instance id; a GPU handle has none (NOT_SUPPORTED). */
static nvmlReturn_t instance_id(int gpu, int mig, const char *field, unsigned long long dflt,
                                unsigned int *id)
{
    if (mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (id == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = mig_id(gpu, mig, field, dflt);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    ANY_DEVICE_CALL(device, ret = instance_id(gpu, mig, "gi", (unsigned long long)mig, id););
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    ANY_DEVICE_CALL(device, ret = instance_id(gpu, mig, "ci", 0, id););
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device)
{
    ANY_DEVICE_CALL(migDevice, if (mig < 0 || device == NULL) ret = NVML_ERROR_INVALID_ARGUMENT;
                    else *device = &devices[gpu];);
}

/* ------------------------------------------------------------------ processes */

struct fake_process { unsigned int pid; unsigned long long memory; unsigned int gi, ci; };

#define NO_INSTANCE 0xFFFFFFFFu

/* The `PREFIX*` lines of `kind` ("compute" or "graphics") into out[n...]; the new n. */
static int list_with_prefix(const char *prefix, const char *kind, unsigned int gi,
                            unsigned int ci, struct fake_process *out, int n)
{
    int i;
    for (i = 0; i < n_entries && n < MAX_PROCS; i++) {
        char mem[64] = "", which[32] = "compute";
        unsigned int pid;
        if (strncmp(entries[i].key, prefix, strlen(prefix)) != 0 ||
            sscanf(entries[i].val, "%u %63s %31s", &pid, mem, which) < 1 ||
            strcmp(which, kind) != 0)
            continue;
        out[n].pid = pid;
        out[n].memory = (mem[0] == '\0' || strcmp(mem, "na") == 0)
                            ? NVML_VALUE_NOT_AVAILABLE_ULL
                            : strtoull(mem, NULL, 0);
        out[n].gi = gi;
        out[n].ci = ci;
        n++;
    }
    return n;
}

/* A MIG device's processes; a GPU's own and, MIG enabled, those of all its MIG devices. */
static int list_processes(int gpu, int mig, const char *kind, struct fake_process *out)
{
    char prefix[KEY_LEN];
    int k, n = 0;
    if (mig < 0) {
        snprintf(prefix, sizeof prefix, "gpu.%d.process.", gpu);
        n = list_with_prefix(prefix, kind, NO_INSTANCE, NO_INSTANCE, out, 0);
    }
    for (k = 0; k < MAX_MIG; k++) {
        if ((mig >= 0 && k != mig) || !mig_exists(gpu, k))
            continue;
        snprintf(prefix, sizeof prefix, "gpu.%d.mig.%d.process.", gpu, k);
        n = list_with_prefix(prefix, kind, mig_id(gpu, k, "gi", (unsigned long long)k),
                             mig_id(gpu, k, "ci", 0), out, n);
    }
    return n;
}

/* The two-call protocol of nvmlDeviceGet*RunningProcesses; `stride` is the struct size. */
static nvmlReturn_t running_processes(int gpu, int mig, const char *kind, unsigned int *count,
                                      void *infos, size_t stride)
{
    struct fake_process procs[MAX_PROCS];
    nvmlReturn_t ret = value_error(gpu_lookup(gpu, "processes"));
    int i, n;
    if (ret != NVML_SUCCESS)
        return ret;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = list_processes(gpu, mig, kind, procs);
    if ((unsigned int)n > *count || (infos == NULL && n > 0)) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i = 0; i < n; i++) {
        char *slot = (char *)infos + (size_t)i * stride;
        memset(slot, 0, stride);
        if (stride >= sizeof(nvmlProcessInfo_v2_t)) {
            ((nvmlProcessInfo_v2_t *)slot)->gpuInstanceId = procs[i].gi;
            ((nvmlProcessInfo_v2_t *)slot)->computeInstanceId = procs[i].ci;
        }
        ((nvmlProcessInfo_v1_t *)slot)->pid = procs[i].pid;
        ((nvmlProcessInfo_v1_t *)slot)->usedGpuMemory = procs[i].memory;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

#define PROCESS_CALL(name, kind, type)                                                    \
    nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, type *infos)            \
    {                                                                                   \
        ANY_DEVICE_CALL(device,                                                         \
                        ret = running_processes(gpu, mig, kind, count, infos, sizeof(type));); \
    }

PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses_v3, "compute", nvmlProcessInfo_v2_t)
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses_v2, "compute", nvmlProcessInfo_v2_t)
PROCESS_CALL(nvmlDeviceGetComputeRunningProcesses, "compute", nvmlProcessInfo_v1_t)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses_v3, "graphics", nvmlProcessInfo_v2_t)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses_v2, "graphics", nvmlProcessInfo_v2_t)
PROCESS_CALL(nvmlDeviceGetGraphicsRunningProcesses, "graphics", nvmlProcessInfo_v1_t)

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

static unsigned long long now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned long long)tv.tv_usec;
}

/* The `gpu.N.process_util.K` samples newer than `since` into out; how many. */
static int util_samples(int gpu, unsigned long long since, nvmlProcessUtilizationSample_t *out)
{
    char prefix[KEY_LEN];
    unsigned long long now = now_us();
    int i, n = 0;
    snprintf(prefix, sizeof prefix, "gpu.%d.process_util.", gpu);
    for (i = 0; i < n_entries && n < MAX_PROCS; i++) {
        unsigned int pid, sm;
        unsigned long long stamp = now;
        if (strncmp(entries[i].key, prefix, strlen(prefix)) != 0 ||
            sscanf(entries[i].val, "%u %u %llu", &pid, &sm, &stamp) < 2 || stamp <= since)
            continue;
        memset(&out[n], 0, sizeof out[n]);
        out[n].pid = pid;
        out[n].timeStamp = stamp;
        out[n].smUtil = sm;
        n++;
    }
    return n;
}

/* The two-call protocol: a NULL buffer (or a short one) gets the count and INSUFFICIENT_SIZE. */
static nvmlReturn_t process_utilization(int gpu, nvmlProcessUtilizationSample_t *samples,
                                        unsigned int *count, unsigned long long since)
{
    nvmlProcessUtilizationSample_t found[MAX_PROCS];
    nvmlReturn_t ret = value_error(gpu_lookup(gpu, "process_util"));
    int n;
    if (ret != NVML_SUCCESS)
        return ret;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = util_samples(gpu, since, found);
    if (n == 0)
        return NVML_ERROR_NOT_FOUND;
    if (samples == NULL || (unsigned int)n > *count) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(samples, found, (size_t)n * sizeof found[0]);
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    DEVICE_CALL(device, ret = process_utilization(gpu, utilization, processSamplesCount,
                                                  lastSeenTimeStamp););
}

/* ------------------------------------------------------------------ events */

static int valid_set(nvmlEventSet_t set)
{
    return set >= event_sets && set < event_sets + MAX_SETS && set->used;
}

static nvmlReturn_t event_set_create(nvmlEventSet_t *out)
{
    nvmlReturn_t ret = check_system();
    int s;
    if (ret == NVML_SUCCESS)
        ret = value_error(lookup("event_set"));
    if (ret != NVML_SUCCESS)
        return ret;
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (s = 0; s < MAX_SETS; s++) {
        if (!event_sets[s].used) {
            memset(&event_sets[s], 0, sizeof event_sets[s]);
            event_sets[s].used = 1;
            *out = &event_sets[s];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) { LOCKED(event_set_create(set)); }

static nvmlReturn_t register_events(int gpu, unsigned long long types, nvmlEventSet_t set)
{
    nvmlReturn_t ret = value_error(gpu_lookup(gpu, "events"));
    if (ret != NVML_SUCCESS)
        return ret;
    if (!valid_set(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (types & ~NVML_EVENT_TYPE_XID)
        return NVML_ERROR_NOT_SUPPORTED; /* the fake only knows Xid events */
    set->types[gpu] |= types;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set)
{
    DEVICE_CALL(device, ret = register_events(gpu, types, set););
}

static nvmlReturn_t event_wait(nvmlEventSet_t set, nvmlEventData_t *data, size_t size)
{
    struct queued_xid event;
    nvmlReturn_t ret = check_system();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!valid_set(set) || data == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (set->count == 0)
        return NVML_ERROR_TIMEOUT;
    event = set->queue[set->head];
    set->head = (set->head + 1) % QUEUE_LEN;
    set->count--;
    memset(data, 0, size);
    data->device = &devices[event.gpu];
    data->eventType = NVML_EVENT_TYPE_XID;
    data->eventData = event.xid;
    if (size >= sizeof(nvmlEventData_t)) {
        data->gpuInstanceId = 0xFFFFFFFF;
        data->computeInstanceId = 0xFFFFFFFF;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int ms)
{
    (void)ms;
    LOCKED(event_wait(set, data, sizeof(nvmlEventData_t)));
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t *data, unsigned int ms)
{
    (void)ms;
    LOCKED(event_wait(set, (nvmlEventData_t *)data, sizeof(nvmlEventData_v1_t)));
}

static nvmlReturn_t event_set_free(nvmlEventSet_t set)
{
    if (!valid_set(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    set->used = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) { LOCKED(event_set_free(set)); }
