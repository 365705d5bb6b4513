#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "dir.h"
#include "file.h"

extern char **environ;

int proc_start(Proc *p, char *const argv[], int stdout_to_stderr) {
    memset(p, 0, sizeof *p);
    p->pid = -1;
    snprintf(p->what, sizeof p->what, "%s", argv[0]);
    int fds[2] = {-1, -1};
    if (!stdout_to_stderr && pipe(fds) != 0) return mhar_fail("%s: pipe: %s", argv[0], strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (stdout_to_stderr) {
        posix_spawn_file_actions_adddup2(&fa, 2, 1); // keep our stdout clean
    } else {
        posix_spawn_file_actions_addclose(&fa, fds[0]);
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        posix_spawn_file_actions_addclose(&fa, fds[1]);
    }
    int rc = posix_spawnp(&p->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (!stdout_to_stderr) close(fds[1]);
    if (rc != 0) {
        if (!stdout_to_stderr) close(fds[0]);
        p->pid = -1;
        return mhar_fail("cannot run %s: %s", argv[0], strerror(rc));
    }
    if (!stdout_to_stderr) {
        p->f = fdopen(fds[0], "rb");
        if (!p->f) {
            int err = errno;
            close(fds[0]);
            proc_abort(p);
            return mhar_fail("%s: fdopen: %s", argv[0], strerror(err));
        }
    }
    return MHAR_OK;
}

int proc_finish(Proc *p) {
    if (p->f) fclose(p->f);
    p->f = NULL;
    int status;
    while (waitpid(p->pid, &status, 0) < 0)
        if (errno != EINTR) return mhar_fail("%s: waitpid: %s", p->what, strerror(errno));
    p->pid = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return MHAR_OK;
    if (WIFEXITED(status)) return mhar_fail("%s exited with status %d", p->what, WEXITSTATUS(status));
    return mhar_fail("%s was killed by signal %d", p->what, WTERMSIG(status));
}

void proc_abort(Proc *p) {
    if (p->pid > 0) kill(p->pid, SIGKILL);
    if (p->f) fclose(p->f);
    p->f = NULL;
    if (p->pid > 0)
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
    p->pid = -1;
}

int proc_output(char *const argv[], char **data, size_t *n) {
    Proc p;
    *data = NULL;
    if (proc_start(&p, argv, 0)) return MHAR_ERR;
    if (read_stream(p.f, argv[0], data, n)) { proc_abort(&p); return MHAR_ERR; }
    if (proc_finish(&p)) { free(*data); *data = NULL; return MHAR_ERR; }
    return MHAR_OK;
}

int on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    char full[MHAR_PATH_MAX];
    while (*path) {
        size_t n = strcspn(path, ":");
        // snprintf, not path_format: a question must not overwrite mhar_error().
        int len = snprintf(full, sizeof full, "%.*s/%s", (int)n, path, name);
        if (n && len > 0 && (size_t)len < sizeof full && path_is_file(full) && access(full, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}
