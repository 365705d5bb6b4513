// Running a program without a shell (arguments need no quoting): its stdin
// is /dev/null, its stdout a pipe to us (or our stderr), its stderr ours.
// MHAR_OK / MHAR_ERR with a message naming the program and the reason.
#pragma once
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
    FILE *f;       // the child's stdout (NULL when it goes to our stderr)
    pid_t pid;
    char what[64]; // argv[0], for messages
} Proc;

// Start argv[0] (searched on PATH). stdout_to_stderr: the child's output goes
// to our stderr (progress of a long tool) and p->f stays NULL.
int proc_start(Proc *p, char *const argv[], int stdout_to_stderr);
// Close the pipe and wait; an exit status other than 0 is an error.
int proc_finish(Proc *p);
// After an error of ours: kill the child and reap it, keeping our message.
void proc_abort(Proc *p);
// Run a program to its end and capture its whole stdout (NUL-terminated,
// malloc'd); a non-zero exit is an error.
int proc_output(char *const argv[], char **data, size_t *n);
// 1 if an executable regular file named name is on PATH, else 0.
int on_path(const char *name);
