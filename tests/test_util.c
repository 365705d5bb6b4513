// The shared helpers of src/util: error messages (mhar_fail wrapping its own
// last message), path composition, whole-file and stream reads, directories,
// JSON getters, the median, running a program and the cache sizes.
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfiles.h"
#include "util/cachesize.h"
#include "util/common.h"
#include "util/dir.h"
#include "util/file.h"
#include "util/json.h"
#include "util/median.h"
#include "util/subprocess.h"

// mhar_fail("...%s", mhar_error()) formats the error buffer into itself: the
// message must come out as if the earlier one had been copied first.
static void test_fail_wraps_itself(void) {
    mhar_fail("inner error %d", 42);
    mhar_fail("wrapped: %s", mhar_error());
    CHECK(!strcmp(mhar_error(), "wrapped: inner error 42"), "fail_wraps_own_message", "got '%s'", mhar_error());
    // The earlier message after a prefix longer than itself, twice over.
    mhar_fail("abc");
    mhar_fail("a longer prefix than the message: %s", mhar_error());
    mhar_fail("%s / %s", mhar_error(), mhar_error());
    CHECK(!strcmp(mhar_error(), "a longer prefix than the message: abc / a longer prefix than the message: abc"),
          "fail_wraps_twice", "got '%s'", mhar_error());
    // A message longer than the buffer is cut, never overrun.
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(mhar_fail("%s", big) == MHAR_ERR && strlen(mhar_error()) == 1023, "fail_truncates", "length %zu",
          strlen(mhar_error()));
}

static void test_paths(void) {
    char out[16];
    CHECK(path_join(out, sizeof out, "dir", "name.txt") == MHAR_OK && !strcmp(out, "dir/name.txt"), "path_join",
          "got '%s'", out);
    CHECK(path_join(out, sizeof out, "directory", "name.txt") == MHAR_ERR && has(mhar_error(), "too long"),
          "path_join_too_long", "%s", mhar_error());
    CHECK(path_format(out, sizeof out, "%s/shard-%02d", "d", 7) == MHAR_OK && !strcmp(out, "d/shard-07"),
          "path_format", "got '%s'", out);
    // 15 characters fit out[16]; 16 do not, and nothing truncated is left.
    CHECK(path_format(out, sizeof out, "%s", "123456789012345") == MHAR_OK, "path_format_exact_fit", "%s",
          mhar_error());
    CHECK(path_format(out, sizeof out, "%s.tmp.%d", "1234567890", 1234) == MHAR_ERR && out[0] == '\0' &&
              has(mhar_error(), "too long") && has(mhar_error(), "1234567890"),
          "path_format_too_long", "rc message '%s', out '%s'", mhar_error(), out);
    CHECK(MHAR_PATH_MAX == 4096, "path_max", "%d", MHAR_PATH_MAX);
    CHECK(copy_str(out, sizeof out, "0123456789abcdef") == MHAR_ERR, "copy_str_too_long", "%s", mhar_error());
}

static void test_read_file(void) {
    const char *p = tpath("text.txt");
    write_bytes(p, "hello\0world", 11);
    char *d = NULL;
    size_t n = 0;
    int rc = read_file(p, &d, &n);
    CHECK(rc == MHAR_OK && n == 11 && !memcmp(d, "hello\0world", 11) && d[11] == '\0', "read_file",
          "rc %d n %zu", rc, n);
    free(d);
    write_bytes(p, "", 0);
    rc = read_file(p, &d, NULL);
    CHECK(rc == MHAR_OK && d && d[0] == '\0', "read_file_empty", "%s", mhar_error());
    free(d);
    write_bytes(p, "0123456789", 10);
    rc = read_file_max(p, 10, &d, &n);
    CHECK(rc == MHAR_OK && n == 10, "read_file_max_at_limit", "%s", mhar_error());
    free(d);
    rc = read_file_max(p, 9, &d, &n);
    CHECK(rc == MHAR_ERR && d == NULL && n == 0 && has(mhar_error(), p) && has(mhar_error(), "9-byte limit"),
          "read_file_max_over_limit", "%s", mhar_error());
    rc = read_file(tpath("absent"), &d, &n);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "absent") && has(mhar_error(), strerror(ENOENT)),
          "read_file_missing", "%s", mhar_error());
    rc = read_file(tmpdir, &d, &n);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "not a regular file"), "read_file_directory", "%s", mhar_error());
}

static void test_read_stream(void) {
    // More than the first buffer (1 MiB), so the growth path runs.
    size_t big = (3u << 20) + 5;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (char)('a' + i % 26);
    write_bytes(tpath("stream.bin"), data, big);
    FILE *f = fopen(tpath("stream.bin"), "rb");
    char *got = NULL;
    size_t n = 0;
    int rc = read_stream(f, "stream", &got, &n);
    fclose(f);
    CHECK(rc == MHAR_OK && n == big && !memcmp(got, data, big) && got[big] == '\0', "read_stream",
          "rc %d n %zu", rc, n);
    free(got);
    free(data);
}

static void test_dirs(void) {
    const char *deep = tpath("a/b//c/d");
    CHECK(mkdir_p(deep) == MHAR_OK && path_is_dir(deep), "mkdir_p_nested", "%s", mhar_error());
    CHECK(mkdir_p(deep) == MHAR_OK, "mkdir_p_existing", "%s", mhar_error());
    char with_slash[600];
    snprintf(with_slash, sizeof with_slash, "%s/", tpath("e/f"));
    CHECK(mkdir_p(with_slash) == MHAR_OK && path_is_dir(tpath("e/f")), "mkdir_p_trailing_slash", "%s",
          mhar_error());
    write_bytes(tpath("plain"), "x", 1);
    CHECK(mkdir_p(tpath("plain/sub")) == MHAR_ERR && has(mhar_error(), "plain") &&
              has(mhar_error(), "not a directory"),
          "mkdir_p_through_file", "%s", mhar_error());
    CHECK(mkdir_p(tpath("plain")) == MHAR_ERR && has(mhar_error(), "exists and is not a directory"),
          "mkdir_p_onto_file", "%s", mhar_error());
    CHECK(mkdir_p("") == MHAR_ERR, "mkdir_p_empty", "%s", mhar_error());
    CHECK(path_is_file(tpath("plain")) && !path_is_dir(tpath("plain")) && path_is_dir(tmpdir) &&
              !path_is_file(tmpdir) && !path_is_file(tpath("absent")) && !path_is_dir(tpath("absent")),
          "path_is_file_dir", "wrong answer");
    CHECK(fsync_dir(tmpdir) == MHAR_OK, "fsync_dir", "%s", mhar_error());
    CHECK(fsync_parent(tpath("plain")) == MHAR_OK && fsync_parent("relative-name") == MHAR_OK &&
              fsync_parent("/top") == MHAR_OK,
          "fsync_parent", "%s", mhar_error());
    CHECK(fsync_dir(tpath("absent")) == MHAR_ERR && has(mhar_error(), "absent"), "fsync_dir_missing", "%s",
          mhar_error());
    CHECK(fsync_parent(tpath("absent/x")) == MHAR_ERR && has(mhar_error(), "absent"), "fsync_parent_missing",
          "%s", mhar_error());
}

static cJSON *parse(const char *text) {
    cJSON *j = NULL;
    if (json_parse(text, strlen(text), "t.json", &j)) { printf("FAIL json_fixture: %s\n", mhar_error()); exit(1); }
    return j;
}

static void test_json(void) {
    cJSON *j = parse("{\"n\": 12, \"f\": 2.5, \"big\": 1e15, \"neg\": -3, \"s\": \"text\", \"b\": true,"
                     " \"huge\": 1e300, \"frac\": 3.5, \"str\": \"12\", \"nul\": null}");
    int i = -1;
    CHECK(json_get_int(j, "t.json", "n", 1, 0, 100, &i) == MHAR_OK && i == 12, "json_int", "%d %s", i,
          mhar_error());
    i = 7;
    CHECK(json_get_int(j, "t.json", "absent", 0, 0, 100, &i) == MHAR_OK && i == 7, "json_int_optional_absent",
          "%d", i);
    CHECK(json_get_int(j, "t.json", "absent", 1, 0, 100, &i) == MHAR_ERR &&
              !strcmp(mhar_error(), "t.json: required key 'absent' is missing"),
          "json_int_required_absent", "%s", mhar_error());
    CHECK(json_get_int(j, "t.json", "n", 1, 0, 10, &i) == MHAR_ERR && i == 7 &&
              !strcmp(mhar_error(), "t.json: key 'n' is 12, out of range 0..10"),
          "json_int_out_of_range", "%s", mhar_error());
    CHECK(json_get_int(j, "t.json", "big", 1, 0, 1L << 40, &i) == MHAR_ERR && has(mhar_error(), "out of range"),
          "json_int_beyond_int", "%s", mhar_error());
    CHECK(json_get_int(j, "t.json", "frac", 1, 0, 10, &i) == MHAR_ERR && has(mhar_error(), "'frac'") &&
              has(mhar_error(), "not an integer"),
          "json_int_fraction", "%s", mhar_error());
    CHECK(json_get_int(j, "t.json", "str", 1, 0, 100, &i) == MHAR_ERR && has(mhar_error(), "t.json") &&
              has(mhar_error(), "'str'") && has(mhar_error(), "integer number"),
          "json_int_wrong_type", "%s", mhar_error());
    CHECK(json_get_int(j, "t.json", "neg", 1, -5, 5, &i) == MHAR_OK && i == -3, "json_int_negative", "%d", i);
    int64_t l = 0;
    CHECK(json_get_i64(j, "t.json", "big", 1, 0, INT64_MAX, &l) == MHAR_OK && l == 1000000000000000LL,
          "json_i64", "%lld %s", (long long)l, mhar_error());
    CHECK(json_get_i64(j, "t.json", "huge", 1, 0, INT64_MAX, &l) == MHAR_ERR && has(mhar_error(), "'huge'"),
          "json_i64_beyond_2_53", "%s", mhar_error());
    double d = 0;
    CHECK(json_get_double(j, "t.json", "f", 1, 0, 3, &d) == MHAR_OK && d == 2.5, "json_double", "%g", d);
    CHECK(json_get_double(j, "t.json", "f", 1, 3, 4, &d) == MHAR_ERR && d == 2.5 &&
              has(mhar_error(), "'f' is 2.5, outside 3..4"),
          "json_double_out_of_range", "%s", mhar_error());
    CHECK(json_get_double(j, "t.json", "nul", 1, 0, 1, &d) == MHAR_ERR && has(mhar_error(), "must be a number"),
          "json_double_null", "%s", mhar_error());
    char s[5] = "";
    CHECK(json_get_string(j, "t.json", "s", 1, s, sizeof s) == MHAR_OK && !strcmp(s, "text"), "json_string",
          "'%s' %s", s, mhar_error());
    char small[4] = "old";
    CHECK(json_get_string(j, "t.json", "s", 1, small, sizeof small) == MHAR_ERR && !strcmp(small, "old") &&
              has(mhar_error(), "'s'"),
          "json_string_too_long", "%s", mhar_error());
    CHECK(json_get_string(j, "t.json", "n", 1, s, sizeof s) == MHAR_ERR && has(mhar_error(), "must be a string"),
          "json_string_wrong_type", "%s", mhar_error());
    int b = -1;
    CHECK(json_get_bool(j, "t.json", "b", 1, &b) == MHAR_OK && b == 1, "json_bool", "%d", b);
    CHECK(json_get_bool(j, "t.json", "n", 1, &b) == MHAR_ERR && has(mhar_error(), "true or false"),
          "json_bool_wrong_type", "%s", mhar_error());
    CHECK(json_get_int(NULL, "t.json", "n", 1, 0, 1, &i) == MHAR_ERR && has(mhar_error(), "missing"),
          "json_not_an_object", "%s", mhar_error());
    // Lenient reads: the default when absent or of another type.
    CHECK(!strcmp(json_string_or(j, "s", "d"), "text") && !strcmp(json_string_or(j, "n", "d"), "d") &&
              json_string_or(j, "absent", NULL) == NULL,
          "json_string_or", "wrong value");
    CHECK(json_number_or(j, "f", -1) == 2.5 && json_number_or(j, "s", -1) == -1 &&
              json_number_or(j, "nul", -1) == -1 && isnan(json_number_or(j, "absent", NAN)),
          "json_number_or", "wrong value");
    CHECK(json_bool_or(j, "b", 0) == 1 && json_bool_or(j, "n", 7) == 7 && json_bool_or(NULL, "b", 5) == 5,
          "json_bool_or", "wrong value");
    cJSON_Delete(j);

    cJSON *k = NULL;
    CHECK(json_parse("{} {}", 5, "g.json", &k) == MHAR_ERR && k == NULL && has(mhar_error(), "g.json") &&
              has(mhar_error(), "trailing"),
          "json_parse_trailing", "%s", mhar_error());
    CHECK(json_parse("{\"a\": ", 6, "g.json", &k) == MHAR_ERR && has(mhar_error(), "invalid JSON"),
          "json_parse_invalid", "%s", mhar_error());
    CHECK(json_parse("[1]\n\t ", 6, "g.json", &k) == MHAR_OK && cJSON_IsArray(k), "json_parse_whitespace", "%s",
          mhar_error());
    cJSON_Delete(k);
    write_bytes(tpath("l.json"), "{\"x\": 1}\n", 9);
    CHECK(json_load(tpath("l.json"), &k) == MHAR_OK && json_get_int(k, "l.json", "x", 1, 0, 1, &i) == MHAR_OK &&
              i == 1,
          "json_load", "%s", mhar_error());
    cJSON_Delete(k);
    CHECK(json_load(tpath("absent.json"), &k) == MHAR_ERR && has(mhar_error(), "absent.json"), "json_load_missing",
          "%s", mhar_error());
}

static void test_median(void) {
    double odd[] = {5, 1, 4, 2, 3};
    CHECK(median(odd, 5) == 3, "median_odd", "%g", median(odd, 5));
    double even[] = {10, 1, 4, 2};
    CHECK(median(even, 4) == 3, "median_even", "%g", median(even, 4));
    double one[] = {7};
    CHECK(median(one, 1) == 7, "median_one", "%g", median(one, 1));
    CHECK(isnan(median(NULL, 0)), "median_empty", "not NaN");
    double nan_last[] = {NAN, 2, 1};
    CHECK(median(nan_last, 3) == 2 && isnan(nan_last[2]), "median_nan_sorts_last", "%g", nan_last[1]);
    const double rounds[5] = {4, 1, 5, 2, 3};
    Spread sp = spread(rounds, 5);
    CHECK(sp.median == 3 && sp.min == 1 && sp.max == 5 && rounds[0] == 4 && rounds[1] == 1, "spread_keeps_order",
          "%g %g %g, v[0] %g", sp.median, sp.min, sp.max, rounds[0]);
    const double gap[3] = {NAN, 2, -1};
    sp = spread(gap, 3);
    CHECK(sp.min == -1 && sp.max == 2 && isnan(gap[0]), "spread_ignores_nan", "%g %g", sp.min, sp.max);
    sp = spread(NULL, 0);
    CHECK(isnan(sp.median) && isnan(sp.min) && isnan(sp.max), "spread_empty", "%g", sp.median);
}

static void test_subprocess(void) {
    char *argv[] = {"printf", "a%sb", "-x-", NULL};
    char *out = NULL;
    size_t n = 0;
    int rc = proc_output(argv, &out, &n);
    CHECK(rc == MHAR_OK && n == 5 && !strcmp(out, "a-x-b"), "proc_output", "rc %d '%s' %s", rc, out ? out : "",
          mhar_error());
    free(out);
    char *fail[] = {"sh", "-c", "exit 3", NULL};
    rc = proc_output(fail, &out, &n);
    CHECK(rc == MHAR_ERR && out == NULL && !strcmp(mhar_error(), "sh exited with status 3"), "proc_exit_status",
          "%s", mhar_error());
    char *killed[] = {"sh", "-c", "kill -9 $$", NULL};
    rc = proc_output(killed, &out, &n);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "signal 9"), "proc_killed", "%s", mhar_error());
    char *absent[] = {"mhar-no-such-program", NULL};
    rc = proc_output(absent, &out, &n);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "cannot run mhar-no-such-program"), "proc_missing_program", "%s",
          mhar_error());
    Proc p;
    char *loud[] = {"sh", "-c", "echo to-stderr", NULL};
    rc = proc_start(&p, loud, 1);
    CHECK(rc == MHAR_OK && p.f == NULL && proc_finish(&p) == MHAR_OK, "proc_stdout_to_stderr", "%s",
          mhar_error());
    char *endless[] = {"sh", "-c", "while :; do echo y; done", NULL};
    mhar_fail("our own error");
    rc = proc_start(&p, endless, 0);
    if (rc == MHAR_OK) { mhar_fail("our own error"); proc_abort(&p); }
    CHECK(rc == MHAR_OK && p.pid == -1 && !strcmp(mhar_error(), "our own error"), "proc_abort_keeps_message",
          "%s", mhar_error());
    CHECK(on_path("sh") && !on_path("mhar-no-such-program"), "on_path", "wrong answer");
}

// A fake sysfs cache tree: the AMD EPYC VM's, where glibc's sysconf said
// L3 320 MiB. Levels may repeat (L1 data and instruction); the instruction
// cache never counts; sizes come in K, M or plain bytes.
static void fake_cache(const char *root, int i, const char *level, const char *type, const char *size) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cpu0/cache/index%d", root, i);
    if (mkdir_p(dir) != MHAR_OK) { printf("FAIL cache_fake_tree: %s\n", mhar_error()); exit(1); }
    const char *names[] = {"level", "type", "size"}, *values[] = {level, type, size};
    for (int k = 0; k < 3; k++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        write_bytes(path, values[k], strlen(values[k]));
    }
}

static void test_cache_sizes(void) {
    char root[600];
    snprintf(root, sizeof root, "%s", tpath("sys"));
    CHECK(cache_bytes_sysfs(root, 2) == 0, "cache_sysfs_absent", "a missing tree must give 0");
    fake_cache(root, 0, "1\n", "Data\n", "32K\n");
    fake_cache(root, 1, "1\n", "Instruction\n", "64K\n");
    fake_cache(root, 2, "2\n", "Unified\n", "1024K\n");
    fake_cache(root, 3, "3\n", "Unified\n", "32768K\n");
    long l1 = cache_bytes_sysfs(root, 1), l2 = cache_bytes_sysfs(root, 2), l3 = cache_bytes_sysfs(root, 3);
    CHECK(l1 == 32 << 10 && l2 == 1 << 20 && l3 == 32L << 20 && cache_bytes_sysfs(root, 4) == 0, "cache_sysfs_levels",
          "L1 %ld, L2 %ld, L3 %ld", l1, l2, l3);
    fake_cache(root, 3, "3", "Unified", "2M");
    fake_cache(root, 5, "3", "Unified", "999999");  // after a gap: not read
    l3 = cache_bytes_sysfs(root, 3);
    CHECK(l3 == 2 << 20, "cache_sysfs_units_and_gap", "L3 %ld", l3);
    fake_cache(root, 3, "3", "Unified", "lots");
    CHECK(cache_bytes_sysfs(root, 3) == 0, "cache_sysfs_unparsable", "an unparsable size must give 0");
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)type; (void)ftw;
    return remove(path);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_util.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_fail_wraps_itself();
    test_paths();
    test_read_file();
    test_read_stream();
    test_dirs();
    test_json();
    test_median();
    test_subprocess();
    test_cache_sizes();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    CHECK_EXIT();
}
