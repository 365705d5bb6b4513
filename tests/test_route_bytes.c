// The traffic model of the residual registry (RouteBytes, residual.h), as
// mhar bench's floors use it; the formulas themselves are checked against
// the README's in tests/test_bench.sh. Here, properties that hold for any
// correct model:
//   - every routed scheme that trains from scratch models its traffic (so
//     bench can give each one a floor), and residual_route_bytes says 0
//     for a scheme that does not;
//   - bytes are linear in the tokens (every pass streams rows of n_tok·d);
//   - attnres is mhar with one head, and more heads only add the per-head
//     slots: for each (source, site) pair its logits and weights [n, H]
//     (written once each; read four times in all, with each site's
//     ⟨dx, x⟩ [n, H] that the gather reads per pair), and each site's
//     ⟨dx, x⟩ written once;
//   - the model's zeroing of the dsources rows is added exactly for the
//     schemes that neither set them nor keep their own (2L+1 rows
//     written): none of the modelled ones now, so also for baseline with
//     the flag cleared;
//   - block routing with one layer per block reads fewer source rows than
//     full routing over every sublayer, and more than baseline.
#include <string.h>

#include "check.h"
#include "residual/residual.h"

static Config shape(const char *mode, int heads, int blocks) {
    Config c;
    config_preset("micro", &c);
    c.vocab_size = 512;
    snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", mode);
    c.attnres_num_heads = heads;
    c.attnres_num_blocks = blocks;
    return c;
}

static RouteBytes bytes(const char *mode, int heads, int blocks, int n_tok) {
    Config c = shape(mode, heads, blocks);
    RouteBytes b;
    residual_route_bytes(residual_find(mode), &c, n_tok, &b);
    return b;
}

int main(void) {
    for (int i = 0; i < residual_count(); i++) {
        const ResidualScheme *s = residual_at(i);
        char name[96];
        snprintf(name, sizeof name, "route_bytes.modelled.%s", s->name);
        Config c = shape(s->name, s->heads == HEADS_ANY ? 4 : 1, s->needs_blocks ? 4 : 0);
        RouteBytes b = {1, 1};
        int got = residual_route_bytes(s, &c, 4096, &b);
        if (residual_is_routed(s) && s->from_scratch)
            CHECK(got == 1 && b.read > 0 && b.write > 0, name, "routed scheme %s: modelled %d, %g / %g bytes", s->name,
                  got, b.read, b.write);
        else
            CHECK(got == (s->route_bytes != NULL) && (got || (b.read == 0 && b.write == 0)), name,
                  "%s: returned %d, %g / %g bytes", s->name, got, b.read, b.write);
        if (!got) continue;
        RouteBytes b2;
        residual_route_bytes(s, &c, 8192, &b2);
        snprintf(name, sizeof name, "route_bytes.linear_in_tokens.%s", s->name);
        CHECK(b2.read == 2 * b.read && b2.write == 2 * b.write, name, "4096 tokens %g / %g, 8192 tokens %g / %g",
              b.read, b.write, b2.read, b2.write);
    }
    const int n = 4096, L = 8, P = 2 * L + 1;
    RouteBytes a = bytes("attnres", 1, 0, n), m1 = bytes("mhar", 1, 0, n), m8 = bytes("mhar", 8, 0, n);
    CHECK(a.read == m1.read && a.write == m1.write, "route_bytes.attnres_is_mhar_h1", "attnres %g / %g, mhar H=1 %g / %g",
          a.read, a.write, m1.read, m1.write);
    const double w_floats = (double)P * (P + 1) / 2 * n * 7;  // 7 more heads of one slot over every (source, site)
    CHECK(m8.read - m1.read == 4 * 4 * w_floats && m8.write - m1.write == 8 * (2 * w_floats + (double)P * n * 7),
          "route_bytes.heads_add_weights", "H 8 - H 1: read %g, write %g; slots %g floats", m8.read - m1.read,
          m8.write - m1.write, w_floats);
    // The wrapper adds the model's zeroing of the 2L+1 dsources rows to exactly
    // the schemes that neither write them themselves nor keep their own
    // (source_grad: the model has none), and nothing else.
    int modelled = 0;
    for (int i = 0; i < residual_count(); i++) {
        const ResidualScheme *s = residual_at(i);
        if (!s->route_bytes) continue;
        Config c = shape(s->name, s->heads == HEADS_ANY ? 4 : 1, s->needs_blocks ? 4 : 0);
        RouteBytes own = s->route_bytes(&c, n), total;
        residual_route_bytes(s, &c, n, &total);
        const double want = s->sets_source_grads || s->source_grad ? 0 : 8.0 * P * n * c.hidden_size;
        char name[96];
        snprintf(name, sizeof name, "route_bytes.model_zeroing.%s", s->name);
        CHECK(total.read == own.read && total.write - own.write == want, name, "%s: added %g bytes, want %g",
              s->name, total.write - own.write, want);
        modelled++;
    }
    // Every modelled scheme writes them now; one that did not would get them added.
    ResidualScheme unset = residual_baseline;
    unset.sets_source_grads = 0;
    Config cb = shape("baseline", 1, 0);
    RouteBytes own = unset.route_bytes(&cb, n), total;
    residual_route_bytes(&unset, &cb, n, &total);
    CHECK(total.read == own.read && total.write - own.write == 8.0 * P * n * cb.hidden_size,
          "route_bytes.model_zeroing.unset", "added %g bytes, want %g", total.write - own.write,
          8.0 * P * n * cb.hidden_size);
    CHECK(modelled >= 4, "route_bytes.model_zeroing_count", "%d schemes modelled", modelled);
    RouteBytes base = bytes("baseline", 1, 0, n);
    RouteBytes blk = bytes("block", 8, L, n);
    CHECK(blk.read < m8.read && blk.read > base.read, "route_bytes.block_between",
          "read: baseline %g < block N=L %g < mhar %g", base.read, blk.read, m8.read);
    CHECK_EXIT();
}
