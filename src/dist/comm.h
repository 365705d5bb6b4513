// The communication interface of data-parallel training: the few collectives
// the training loop needs, on float and double buffers. MPI is behind it now
// (comm.c); a GPU backend would put NCCL behind the same calls.
//
// A process started by mpirun or srun is one rank of the job; a process
// started any other way is a job of one rank, and no MPI call is made.
// Every collective returns MHAR_OK or MHAR_ERR with a message; a job whose
// rank fails in a collective is ended (MPI's default: abort the job), so no
// rank waits forever.
#pragma once
#include <stddef.h>
#include "../kernels/ops.h"

typedef struct {
    int rank, size;
    int mpi;               // 1 when MPI was initialised (size may still be 1)
    int ending;            // comm_job_ending was called
    void *pending;         // transfers begun and not yet waited for (comm.c)
    int n_pending, cap_pending;
    char host[64];         // this rank's host name, for messages
} Comm;

// The parameter shards of ZeRO-1: rank r owns [lo[r], hi[r]) of n floats.
// Boundaries are multiples of `block` (the last shard takes the rest), so a
// reduction done per block gives the same bits for any number of ranks.
typedef struct {
    int size;
    size_t n, block;
    size_t *lo, *hi;       // [size]
} Shards;

// Initialise (MPI_Init when launched by mpirun/srun). Call once, first.
int comm_init(Comm *c, int *argc, char ***argv);
void comm_finalize(Comm *c);
// The launcher is ending the job (a signal reached mpirun, which tears the
// job down): comm_finalize then leaves MPI without its closing handshake,
// which the launcher no longer answers.
void comm_job_ending(Comm *c);
// End every rank of the job now, with this exit status (MPI_Abort).
void comm_abort(Comm *c, int status);
int comm_barrier(Comm *c);
// A barrier that sleeps while it waits, leaving the cores to the ranks that work.
int comm_idle_barrier(Comm *c);

// Agree on failure: every rank passes its own status; all return MHAR_OK
// when every rank succeeded. Otherwise every rank returns MHAR_ERR, and the
// lowest failing rank's message (prefixed with its rank and host) becomes
// every rank's mhar_error().
int comm_agree(Comm *c, int status);
// Broadcast bytes from `root` to every rank.
int comm_bcast(Comm *c, void *buf, size_t bytes, int root);
// The largest of every rank's v, on every rank.
int comm_max_int(Comm *c, int *v);
// In place: buf [n] becomes the sum of every rank's. The order of the
// additions is MPI's: exact where at most one rank's value is non-zero.
int comm_sum_f64(Comm *c, double *buf, size_t n);
// Every rank contributes `count` doubles; all receive size·count, rank-major.
int comm_allgather_f64(Comm *c, const double *send, double *recv, size_t count);
// Rank r contributes counts[r] doubles; all receive them concatenated in rank order.
int comm_allgatherv_f64(Comm *c, const double *send, double *recv, const size_t *counts);

int shards_init(Shards *s, size_t n, int size, size_t block);
void shards_free(Shards *s);
// In place: every rank holds buf [n]; afterwards each shard r on every rank
// holds rank r's values.
int comm_allgather_shards(Comm *c, float *buf, const Shards *s);
// out [hi-lo of this rank] (=, or += when accumulate) send_0[shard] +
// send_1[shard] + … + send_{size-1}[shard], added in rank order starting
// from out (accumulate) or from send_0: a fixed order, so the result does not
// depend on timing. scratch holds size · (largest shard) floats.
// The additions run on ops' backend ctx.
int comm_reduce_scatter(Comm *c, OpsContext *ops, const float *send, float *out, const Shards *s, int accumulate,
                        float *scratch);
// The same in pieces, to overlap it with computing: _begin starts sending
// send[lo, hi) (final by then; it must stay unchanged until _end) and
// returns at once; comm_progress lets the transfers advance; _end waits for
// every piece begun, whose ranges must together cover [0, n) once, and adds
// them in rank order exactly as comm_reduce_scatter does.
int comm_reduce_scatter_begin(Comm *c, const float *send, size_t lo, size_t hi, const Shards *s, float *scratch);
int comm_progress(Comm *c);
int comm_reduce_scatter_end(Comm *c, OpsContext *ops, float *out, const Shards *s, int accumulate, float *scratch);
// Rank 0 receives every rank's shard `mine` [hi-lo] into full [n] (for a
// checkpoint); full is not used on other ranks.
int comm_gather_shards(Comm *c, const float *mine, float *full, const Shards *s);

// The communicator of this process, set by comm_init; before that (a test
// calling the library directly) a job of one rank.
Comm *comm_world(void);
