// The communication interface on MPI (comm.h). Single-rank jobs never call MPI.
#include "comm.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/common.h"

static Comm *world = NULL;
static Comm single = {.rank = 0, .size = 1, .mpi = 0, .host = "this host"};
Comm *comm_world(void) { return world ? world : &single; }

// mpirun (Open MPI, MPICH's hydra) and srun (PMI/PMIx) tell a process it is
// one rank of a job through its environment.
static int launched_by_mpi(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static int mpi_fail(int err, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    return mhar_fail("%s: %s", what, text);
}
#define MPI_CHECK(call, what)                           \
    do {                                                \
        int e_ = (call);                                \
        if (e_ != MPI_SUCCESS) return mpi_fail(e_, what); \
    } while (0)

int comm_init(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof *c);
    c->size = 1;
    if (gethostname(c->host, sizeof c->host - 1)) snprintf(c->host, sizeof c->host, "unknown host");
    world = c;
    if (!launched_by_mpi()) return MHAR_OK;
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return mhar_fail("MPI_Init failed");
    c->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    return MHAR_OK;
}

void comm_job_ending(Comm *c) { c->ending = 1; }

void comm_finalize(Comm *c) {
    free(c->pending);
    c->pending = NULL, c->n_pending = c->cap_pending = 0;
    if (c->mpi && !c->ending) MPI_Finalize();
    c->mpi = 0;
    world = NULL;
}

void comm_abort(Comm *c, int status) {
    if (c->mpi) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

int comm_barrier(Comm *c) {
    if (c->size > 1) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return MHAR_OK;
}

int comm_idle_barrier(Comm *c) {
    if (c->size == 1) return MHAR_OK;
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
    for (int done = 0;;) {
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return MHAR_OK;
        usleep(1000);
    }
}

int comm_agree(Comm *c, int status) {
    if (c->size == 1) return status ? MHAR_ERR : MHAR_OK;
    int mine = status ? c->rank : c->size, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (first == c->size) return MHAR_OK;
    char msg[1024];
    if (c->rank == first) snprintf(msg, sizeof msg, "rank %d on %s: %s", c->rank, c->host, mhar_error());
    MPI_CHECK(MPI_Bcast(msg, sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD), "MPI_Bcast");
    msg[sizeof msg - 1] = 0;
    return mhar_fail("%s", msg);
}

int comm_bcast(Comm *c, void *buf, size_t bytes, int root) {
    if (c->size == 1) return MHAR_OK;
    if (bytes > INT32_MAX) return mhar_fail("broadcast of %zu bytes is too large", bytes);
    MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    return MHAR_OK;
}

int comm_max_int(Comm *c, int *v) {
    if (c->size > 1) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return MHAR_OK;
}

int comm_sum_f64(Comm *c, double *buf, size_t n) {
    if (c->size > 1 && n)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return MHAR_OK;
}

int comm_allgather_f64(Comm *c, const double *send, double *recv, size_t count) {
    if (c->size == 1) {
        memcpy(recv, send, count * sizeof(double));
        return MHAR_OK;
    }
    MPI_CHECK(MPI_Allgather(send, (int)count, MPI_DOUBLE, recv, (int)count, MPI_DOUBLE, MPI_COMM_WORLD),
              "MPI_Allgather");
    return MHAR_OK;
}

int comm_allgatherv_f64(Comm *c, const double *send, double *recv, const size_t *counts) {
    if (c->size == 1) {
        memcpy(recv, send, counts[0] * sizeof(double));
        return MHAR_OK;
    }
    int cnt[c->size], disp[c->size];
    for (int r = 0, at = 0; r < c->size; r++) cnt[r] = (int)counts[r], disp[r] = at, at += cnt[r];
    MPI_CHECK(MPI_Allgatherv(send, cnt[c->rank], MPI_DOUBLE, recv, cnt, disp, MPI_DOUBLE, MPI_COMM_WORLD),
              "MPI_Allgatherv");
    return MHAR_OK;
}

int shards_init(Shards *s, size_t n, int size, size_t block) {
    memset(s, 0, sizeof *s);
    if (n > INT32_MAX) return mhar_fail("%zu parameters are more than MPI's counts can address", n);
    s->size = size, s->n = n, s->block = block;
    s->lo = mhar_alloc(sizeof(size_t) * size);
    s->hi = mhar_alloc(sizeof(size_t) * size);
    if (!s->lo || !s->hi) { shards_free(s); return MHAR_ERR; }
    size_t blocks = (n + block - 1) / block;
    for (int r = 0; r < size; r++) {
        size_t b0 = blocks * r / size, b1 = blocks * (r + 1) / size;
        s->lo[r] = b0 * block < n ? b0 * block : n;
        s->hi[r] = b1 * block < n ? b1 * block : n;
    }
    return MHAR_OK;
}

void shards_free(Shards *s) {
    mhar_free(s->lo);
    mhar_free(s->hi);
    memset(s, 0, sizeof *s);
}

static void shard_counts(const Shards *s, int *cnt, int *disp) {
    for (int r = 0; r < s->size; r++) cnt[r] = (int)(s->hi[r] - s->lo[r]), disp[r] = (int)s->lo[r];
}

int comm_allgather_shards(Comm *c, float *buf, const Shards *s) {
    if (c->size == 1) return MHAR_OK;
    int cnt[c->size], disp[c->size];
    shard_counts(s, cnt, disp);
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, cnt, disp, MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgatherv");
    return MHAR_OK;
}

// One piece of a reduce-scatter in flight: MPI needs its counts until it ends.
typedef struct {
    MPI_Request req;
    int *counts;   // [4·size]: send counts, send displacements, receive counts, receive displacements
} Pending;

static int pending_push(Comm *c, Pending p) {
    if (c->n_pending == c->cap_pending) {
        int cap = c->cap_pending ? 2 * c->cap_pending : 64;
        Pending *grown = realloc(c->pending, sizeof(Pending) * cap);
        if (!grown) return mhar_fail("out of memory for %d transfers", cap);
        c->pending = grown, c->cap_pending = cap;
    }
    ((Pending *)c->pending)[c->n_pending++] = p;
    return MHAR_OK;
}

int comm_reduce_scatter_begin(Comm *c, const float *send, size_t lo, size_t hi, const Shards *s, float *scratch) {
    if (c->size == 1 || hi <= lo) return MHAR_OK;
    const int N = c->size;
    const size_t my_lo = s->lo[c->rank], my_hi = s->hi[c->rank], mine = my_hi - my_lo;
    Pending p = {.counts = malloc(sizeof(int) * 4 * N)};
    if (!p.counts) return mhar_fail("out of memory");
    int *scnt = p.counts, *sdisp = scnt + N, *rcnt = sdisp + N, *rdisp = rcnt + N;
    // To rank r: where [lo, hi) meets r's shard. From every rank: where it
    // meets ours, into that rank's row of scratch [size, mine].
    for (int r = 0; r < N; r++) {
        size_t a = lo > s->lo[r] ? lo : s->lo[r], b = hi < s->hi[r] ? hi : s->hi[r];
        scnt[r] = b > a ? (int)(b - a) : 0;
        sdisp[r] = b > a ? (int)a : 0;
    }
    size_t a = lo > my_lo ? lo : my_lo, b = hi < my_hi ? hi : my_hi;
    for (int r = 0; r < N; r++) {
        rcnt[r] = b > a ? (int)(b - a) : 0;
        rdisp[r] = b > a ? (int)(mine * r + (a - my_lo)) : 0;
    }
    int e = MPI_Ialltoallv(send, scnt, sdisp, MPI_FLOAT, scratch, rcnt, rdisp, MPI_FLOAT, MPI_COMM_WORLD, &p.req);
    if (e != MPI_SUCCESS) {
        free(p.counts);
        return mpi_fail(e, "MPI_Ialltoallv");
    }
    return pending_push(c, p);
}

int comm_progress(Comm *c) {
    if (!c->n_pending) return MHAR_OK;
    // Testing the oldest transfer drives MPI's progress engine for all.
    int done;
    MPI_CHECK(MPI_Test(&((Pending *)c->pending)[0].req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return MHAR_OK;
}

int comm_reduce_scatter_end(Comm *c, OpsContext *ops, float *out, const Shards *s, int accumulate, float *scratch) {
    const size_t mine = s->hi[c->rank] - s->lo[c->rank];
    Pending *p = c->pending;
    int rc = MHAR_OK;
    for (int i = 0; i < c->n_pending; i++) {
        int e = MPI_Wait(&p[i].req, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS && rc == MHAR_OK) rc = mpi_fail(e, "MPI_Wait");
        free(p[i].counts);
    }
    c->n_pending = 0;
    if (rc) return rc;
    // Every rank adds the pieces of its shard in rank order itself, so the
    // sum's order is fixed.
    for (int r = 0; r < c->size; r++) {
        if (r == 0 && !accumulate) vec_copy(ops, out, scratch, mine);
        else vec_acc(ops, out, scratch + mine * r, mine);
    }
    return MHAR_OK;
}

int comm_reduce_scatter(Comm *c, OpsContext *ops, const float *send, float *out, const Shards *s, int accumulate,
                        float *scratch) {
    const size_t mine = s->hi[c->rank] - s->lo[c->rank];
    if (c->size == 1) {
        if (accumulate) vec_acc(ops, out, send, mine);
        else vec_copy(ops, out, send, mine);
        return MHAR_OK;
    }
    if (comm_reduce_scatter_begin(c, send, 0, s->n, s, scratch)) return MHAR_ERR;
    return comm_reduce_scatter_end(c, ops, out, s, accumulate, scratch);
}

int comm_gather_shards(Comm *c, const float *mine, float *full, const Shards *s) {
    if (c->size == 1) {
        if (full != mine) memcpy(full, mine, sizeof(float) * (s->hi[0] - s->lo[0]));
        return MHAR_OK;
    }
    int cnt[c->size], disp[c->size];
    shard_counts(s, cnt, disp);
    MPI_CHECK(MPI_Gatherv(mine, cnt[c->rank], MPI_FLOAT, full, cnt, disp, MPI_FLOAT, 0, MPI_COMM_WORLD),
              "MPI_Gatherv");
    return MHAR_OK;
}
