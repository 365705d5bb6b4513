// The streaming tar reader (src/data/tar.c) on archives GNU tar writes in its
// three formats (ustar, gnu long names, pax records), read through a pipe as
// the corpus builder reads the kernel; then damaged and truncated archives.
#include <errno.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfiles.h"
#include "data/tar.h"
#include "util/common.h"
#include "util/dir.h"
#include "util/subprocess.h"

// A path of 185 characters, past ustar's 100-byte name field: ustar splits
// it into its prefix and name fields, gnu writes an 'L' record, pax a path
// record.
static char long_name[186];

static void make_tree(void) {
    memset(long_name, 'd', 60); // d{60}/e{59}/n{60}.txt
    long_name[60] = '/';
    memset(long_name + 61, 'e', 59);
    long_name[120] = '/';
    memset(long_name + 121, 'n', 60);
    memcpy(long_name + 181, ".txt", 5);
    char deep[600];
    snprintf(deep, sizeof deep, "%s/%.120s", tpath("tree"), long_name);
    if (mkdir_p(tpath("tree/sub")) || mkdir_p(deep)) { printf("FAIL tar_setup: %s\n", mhar_error()); exit(1); }
    write_bytes(tpath("tree/a.txt"), "alpha\n", 6);
    write_bytes(tpath("tree/sub/empty.c"), "", 0);
    static char big[1500]; // spans three blocks, the last one padded
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    write_bytes(tpath("tree/sub/big.h"), big, sizeof big);
    char p[600];
    snprintf(p, sizeof p, "%s/%s", tpath("tree"), long_name);
    write_bytes(p, "long\n", 5);
}

// Read the whole archive tar writes for the tree in format fmt: every
// regular file's name and data must come out, the rest skipped.
static void read_format(const char *fmt) {
    char dir[600], name[64];
    snprintf(dir, sizeof dir, "%s", tpath("tree"));
    char format[32];
    snprintf(format, sizeof format, "--format=%s", fmt);
    char *argv[] = {"tar", "-C", dir, "-cf", "-", format, "--sort=name", ".", NULL};
    Proc p;
    if (proc_start(&p, argv, 0)) { printf("FAIL tar_%s_start: %s\n", fmt, mhar_error()); check_failures++; return; }
    Tar t = {.f = p.f, .what = fmt};
    int rc, files = 0, dirs = 0, ok = 1;
    while ((rc = tar_next(&t)) == 1) {
        if (t.type == '5') { dirs++; rc = tar_skip(&t, t.size); if (rc) break; continue; }
        char *data = NULL;
        if ((rc = tar_data(&t, &data))) break;
        files++;
        const char *want = NULL;
        size_t want_len = 0;
        if (!strcmp(t.name, "./a.txt")) want = "alpha\n", want_len = 6;
        else if (!strcmp(t.name, "./sub/empty.c")) want = "", want_len = 0;
        else if (!strcmp(t.name, "./sub/big.h")) want_len = 1500;
        else if (!strncmp(t.name, "./", 2) && !strcmp(t.name + 2, long_name)) want = "long\n", want_len = 5;
        else { ok = 0; printf("unexpected entry '%s'\n", t.name); }
        if (t.size != want_len || (want && memcmp(data, want, want_len)) || data[t.size] != '\0') {
            ok = 0;
            printf("entry '%s': %zu bytes\n", t.name, t.size);
        }
        if (want_len == 1500 && (data[0] != 'a' || data[1499] != (char)('a' + 1499 % 26))) ok = 0;
        free(data);
    }
    if (rc) proc_abort(&p);
    else rc = proc_finish(&p);
    snprintf(name, sizeof name, "tar_reads_%s", fmt);
    CHECK(rc == 0 && ok && files == 4 && dirs == 4, name, "rc %d files %d dirs %d ok %d: %s", rc, files, dirs, ok,
          mhar_error());
}

// An archive file of the tree, for the damage cases.
static size_t archive_file(const char *path, char **bytes) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tpath("tree"));
    char *argv[] = {"tar", "-C", dir, "-cf", "-", "--format=ustar", "a.txt", NULL};
    size_t n = 0;
    if (proc_output(argv, bytes, &n)) { printf("FAIL tar_archive: %s\n", mhar_error()); exit(1); }
    write_bytes(path, *bytes, n);
    return n;
}

static int read_all_entries(const char *path, const void *data, size_t n) {
    write_bytes(path, data, n);
    FILE *f = fopen(path, "rb");
    Tar t = {.f = f, .what = path};
    int rc;
    while ((rc = tar_next(&t)) == 1)
        if ((rc = tar_skip(&t, t.size))) break;
    fclose(f);
    return rc;
}

static void test_damage(void) {
    char *bytes;
    const char *p = tpath("one.tar");
    size_t n = archive_file(p, &bytes);
    CHECK(read_all_entries(p, bytes, n) == 0, "tar_ustar_file", "%s", mhar_error());
    bytes[10] ^= 0x55; // a name byte: the header checksum no longer matches
    int rc = read_all_entries(p, bytes, n);
    CHECK(rc == MHAR_ERR && has(mhar_error(), p) && has(mhar_error(), "checksum"), "tar_bad_checksum", "rc %d %s",
          rc, mhar_error());
    bytes[10] ^= 0x55;
    rc = read_all_entries(p, bytes, 700); // the header and part of the data block
    CHECK(rc == MHAR_ERR && has(mhar_error(), "ends early"), "tar_truncated_data", "rc %d %s", rc, mhar_error());
    rc = read_all_entries(p, bytes, 300); // inside the first header
    CHECK(rc == MHAR_ERR && has(mhar_error(), "inside a header"), "tar_truncated_header", "rc %d %s", rc,
          mhar_error());
    rc = read_all_entries(p, bytes, 1024); // header and data, no end-of-archive blocks
    CHECK(rc == 0, "tar_no_end_blocks", "rc %d %s", rc, mhar_error());
    rc = read_all_entries(p, "", 0);
    CHECK(rc == 0, "tar_empty_stream", "rc %d %s", rc, mhar_error());
    free(bytes);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)type; (void)ftw;
    return remove(path);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_tar.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    if (!on_path("tar")) {
        printf("FAIL tar_program: no tar on PATH (Debian package tar)\n");
        return 1;
    }
    make_tree();
    read_format("ustar");
    read_format("gnu");
    read_format("pax");
    test_damage();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    CHECK_EXIT();
}
