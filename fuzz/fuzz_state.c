// checkpoint_load_state (DIR/checkpoint/state.json, read on --resume) on
// arbitrary bytes: DIR/checkpoint/state.json is a symbolic link to the input
// file. Properties: an error names the file; an accepted state has positive
// batch, seq and accum, 0 <= step <= steps, a finite learning rate and
// non-negative counters.
#include <math.h>
#include <sys/stat.h>

#include "../src/train/checkpoint.h"
#include "../src/util/common.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[128];
    const char *input = fuzz_file(data, size);
    if (!dir[0]) {
        char ck[192], link[256];
        snprintf(dir, sizeof dir, "%s/run", fuzz_dir());
        snprintf(ck, sizeof ck, "%s/checkpoint", dir);
        snprintf(link, sizeof link, "%s/state.json", ck);
        if (mkdir(dir, 0755) || mkdir(ck, 0755) || symlink(input, link)) {
            perror("fuzz_state: setting up the run directory");
            abort();
        }
    }
    TrainState st;
    int rc = checkpoint_load_state(dir, &st);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), "state.json") != NULL, "error does not name the file: %s", mhar_error());
        return 0;
    }
    FUZZ_ASSERT(st.opt.batch >= 1 && st.opt.seq >= 1 && st.opt.accum >= 1, "batch %d seq %d accum %d", st.opt.batch, st.opt.seq, st.opt.accum);
    FUZZ_ASSERT(st.step >= 0 && st.step <= st.opt.steps, "step %ld of %ld", st.step, st.opt.steps);
    FUZZ_ASSERT(isfinite(st.opt.lr) && st.opt.lr >= 0, "lr %g", st.opt.lr);
    FUZZ_ASSERT(st.opt.warmup >= 0 && st.data_epoch >= 0 && st.data_pos >= 0 && st.bad_steps >= 0 && st.opt_step >= 0,
                "negative counter");
    FUZZ_ASSERT(memchr(st.opt.train, 0, sizeof st.opt.train) && memchr(st.opt.val, 0, sizeof st.opt.val),
                "unterminated path");
    return 0;
}
