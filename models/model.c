/* Loading a model by preset name or path (choosing the reader), the options every reader applies, whole-model
 * validation, and the preset catalogue. */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models_internal.h"

void ps_model_opts_init(ps_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dtype = -1;
}

void ps_model_free(ps_model *m)
{
    if (!m) return;
    free(m->layers);
    memset(m, 0, sizeof *m);
}

/* ---- options --------------------------------------------------------------------------------------------------- */

/* x * num / den rounded, at least 1; false when it does not fit in int64. */
static bool scale_tokens(int64_t x, int64_t num, int64_t den, int64_t *out)
{
    double v = (double)x * (double)num / (double)den;
    if (!(v < 9.0e18)) return false;
    int64_t r = (int64_t)llround(v);
    *out = r < 1 ? 1 : r;
    return true;
}

ps_status ps_model_pad_vocab(ps_model *m, int64_t multiple, const char *where)
{
    if (multiple < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: vocab padding = %lld: must be positive", where, (long long)multiple);
    if (multiple <= 1) return PS_OK;
    /* Megatron pads the vocabulary so every tensor-parallel rank gets an equal, aligned slice of it. Every
     * embedding and head alike, so a tied head keeps its embedding's shape. Checked first, changed after: a model
     * is padded whole or not at all. */
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_layer *l = &m->layers[i];
        int64_t up;
        if ((l->kind != PS_LAYER_EMBED && l->kind != PS_LAYER_LM_HEAD) || l->vocab <= 0) continue;
        if (!ps_add_i64(l->vocab, multiple - 1, &up))
            return PS_FAIL(PS_ERR_INPUT, "%s: vocab padded to a multiple of %lld overflows", where,
                           (long long)multiple);
    }
    for (int64_t i = 0; i < m->n_layers; i++) {
        ps_layer *l = &m->layers[i];
        if ((l->kind != PS_LAYER_EMBED && l->kind != PS_LAYER_LM_HEAD) || l->vocab <= 0) continue;
        int64_t rem = l->vocab % multiple;
        if (rem) l->vocab += multiple - rem;
    }
    return PS_OK;
}

static ps_status apply_opts(ps_model *m, const ps_model_opts *opts, const char *where)
{
    if (!opts) return PS_OK;
    PS_TRY(ps_model_pad_vocab(m, opts->vocab_pad, where));
    if (opts->seq < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: sequence length override = %lld: must be positive", where,
                       (long long)opts->seq);
    if (opts->seq > 0 && opts->seq != m->seq) {
        /* Every layer keeps its share of the model's length: a T5-512/4 decoder stays at 1/128 of the encoder, a
         * Swin stage at its fraction of the patches, and cross-attention keys follow the encoder they read. */
        for (int64_t i = 0; i < m->n_layers; i++) {
            ps_layer *l = &m->layers[i];
            if (!scale_tokens(l->seq, opts->seq, m->seq, &l->seq) ||
                (l->kv_seq > 0 && !scale_tokens(l->kv_seq, opts->seq, m->seq, &l->kv_seq)))
                return PS_FAIL(PS_ERR_INPUT, "%s: sequence length %lld makes layer %lld's token count overflow",
                               where, (long long)opts->seq, (long long)i);
        }
        m->seq = opts->seq;
    }
    if (opts->dtype >= 0) {
        if (opts->dtype > PS_DTYPE_FP8)
            return PS_FAIL(PS_ERR_INPUT, "%s: dtype override %d is not a known dtype", where, opts->dtype);
        m->dtype = (ps_dtype)opts->dtype;
    }
    return PS_OK;
}

ps_status ps_model_finish(ps_model *m, ps_layer_vec *vec, const ps_model_opts *opts, const char *where)
{
    m->layers = vec->v;
    m->n_layers = vec->n;
    vec->v = NULL;
    vec->n = vec->cap = 0;
    if (m->seq == 0 && m->n_layers > 0) m->seq = m->layers[0].seq;
    ps_status st = apply_opts(m, opts, where);
    if (st == PS_OK) st = ps_model_validate(m, where);
    if (st != PS_OK) {
        ps_model_free(m);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

/* ---- validation ------------------------------------------------------------------------------------------------ */

/* Where a tied head finds its embedding: every embedding's (vocab, hidden) with its index, sorted by shape then
 * index, so one bisection per head answers "is there an earlier embedding of this shape". Scanning back from each
 * head instead was quadratic: 50000 tied heads behind 50000 embeddings took minutes (found by tests/fuzz). */
typedef struct {
    int64_t vocab, hidden, index;
} embed_key;

static int cmp_embed_key(const embed_key *a, const embed_key *b)
{
    if (a->vocab != b->vocab) return a->vocab < b->vocab ? -1 : 1;
    if (a->hidden != b->hidden) return a->hidden < b->hidden ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int cmp_embed_key_v(const void *a, const void *b) { return cmp_embed_key(a, b); }

/* NULL (and PS_OK) when the model has no tied head, so ordinary models allocate nothing. */
static ps_status index_embeddings(const ps_model *m, embed_key **out, int64_t *count)
{
    *out = NULL;
    *count = 0;
    int64_t n = 0;
    bool tied = false;
    for (int64_t i = 0; i < m->n_layers; i++) {
        n += m->layers[i].kind == PS_LAYER_EMBED;
        tied = tied || (m->layers[i].kind == PS_LAYER_LM_HEAD && m->layers[i].tied);
    }
    if (!tied || n == 0) return PS_OK;
    embed_key *v = ps_calloc((size_t)n, sizeof *v);
    if (!v) return PS_ERR_SYSTEM;
    int64_t k = 0;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == PS_LAYER_EMBED)
            v[k++] = (embed_key){m->layers[i].vocab, m->layers[i].hidden, i};
    qsort(v, (size_t)n, sizeof *v, cmp_embed_key_v);
    *out = v;
    *count = n;
    return PS_OK;
}

/* True when an embedding of the head's shape comes before layer `at`: the first entry of that shape has the
 * smallest index. */
static bool embedding_before(const embed_key *v, int64_t n, const ps_layer *head, int64_t at)
{
    embed_key key = {head->vocab, head->hidden, -1};
    int64_t lo = 0, hi = n; /* first entry >= key */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cmp_embed_key(&v[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].vocab == head->vocab && v[lo].hidden == head->hidden && v[lo].index < at;
}

ps_status ps_model_validate(const ps_model *m, const char *where)
{
    if (!where) where = m->name[0] ? m->name : "model";
    if (m->n_layers < 1 || !m->layers) return PS_FAIL(PS_ERR_INPUT, "%s: the model has no layers", where);
    if (m->n_layers > PS_MODEL_MAX_LAYERS)
        return PS_FAIL(PS_ERR_INPUT, "%s: %lld layers; at most %d are supported", where, (long long)m->n_layers,
                       PS_MODEL_MAX_LAYERS);
    if (m->seq < 1) return PS_FAIL(PS_ERR_INPUT, "%s: seq = %lld: must be at least 1", where, (long long)m->seq);
    if ((int)m->dtype < 0 || m->dtype > PS_DTYPE_FP8)
        return PS_FAIL(PS_ERR_INPUT, "%s: dtype = %d is not a known dtype", where, (int)m->dtype);
    embed_key *emb = NULL;
    int64_t n_emb = 0;
    PS_TRY(index_embeddings(m, &emb, &n_emb));
    ps_status st = PS_OK;
    /* Run by run: the byte copies of a layer pass its checks (a tied head's earlier embedding is earlier still for
     * them), so a repeated block is checked once, not once per copy with a message prefix formatted each time. */
    for (int64_t i = 0; i < m->n_layers && st == PS_OK; i += ps_layer_copies(m, i)) {
        const ps_layer *l = &m->layers[i];
        ps_where w;
        w.sep = ": ";
        snprintf(w.prefix, sizeof w.prefix, "%s: layer %lld (%s)", where, (long long)i, ps_layer_kind_name(l->kind));
        st = ps_layer_check(l, &w);
        if (st != PS_OK) {
            ps_error_trace(st, __FILE__, __LINE__);
        } else if (l->kind == PS_LAYER_LM_HEAD && l->tied && !embedding_before(emb, n_emb, l, i)) {
            /* A tied head reuses the input embedding's matrix, which only works when the shapes agree. */
            st = PS_FAIL(PS_ERR_INPUT,
                         "%s: tied = true but no earlier embedding layer has vocab = %lld and hidden = %lld "
                         "to share weights with",
                         w.prefix, (long long)l->vocab, (long long)l->hidden);
        }
    }
    free(emb);
    if (st != PS_OK) return st;
    if (ps_model_params(m) < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: the total parameter count overflows 64-bit integers", where);
    return PS_OK;
}

/* ---- loading --------------------------------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A psearch model is recognised by its "layers" or, when that is what is missing, by any of its own keys, so the
 * user hears about the missing or misspelt field rather than about formats. */
static bool looks_like_psearch(const json_t *root)
{
    static const char *const keys[] = {"layers", "name", "seq", "hidden", "heads", "vocab", "source", NULL};
    for (const char *const *k = keys; *k; k++)
        if (json_object_get(root, *k)) return true;
    return false;
}

static ps_status load_json_root(const json_t *root, const char *path, const ps_model_opts *opts, ps_model *out)
{
    if (json_object_get(root, "layers")) return ps_model_from_json(root, path, opts, out);
    if (json_object_get(root, "model_type") || json_object_get(root, "architectures"))
        return ps_model_from_hf(root, path, opts, out);
    if (looks_like_psearch(root)) return ps_model_from_json(root, path, opts, out);
    return PS_FAIL(PS_ERR_INPUT,
                   "%s: neither a psearch model (no 'layers' field) nor a Hugging Face config.json (no 'model_type' "
                   "or 'architectures' field)",
                   path);
}

static ps_status set_source(ps_model_source *src, const char *path, ps_model_file_kind kind)
{
    PS_TRY(ps_path_copy(src->path, sizeof src->path, path));
    src->kind = kind;
    return PS_OK;
}

static ps_status locate_path(const char *path, ps_model_source *src)
{
    /* A Hugging Face model folder (what `git clone` of a model repository gives) holds its config.json. */
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char cfg[PATH_MAX + 16];
        int w = snprintf(cfg, sizeof cfg, "%s/config.json", path);
        if (w < 0 || (size_t)w >= sizeof cfg || !is_file(cfg))
            return PS_FAIL(PS_ERR_INPUT, "%s: is a folder without a config.json; give a model file", path);
        return set_source(src, cfg, PS_MODEL_FILE_ANY);
    }
    return set_source(src, path, PS_MODEL_FILE_ANY);
}

ps_status ps_model_parse(const ps_model_source *src, const char *text, size_t len, const ps_model_opts *opts,
                         ps_model *out)
{
    memset(out, 0, sizeof *out);
    const char *path = src->path;
    json_t *root = NULL;
    ps_status st;
    if (src->kind == PS_MODEL_FILE_PRESET) {
        st = ps_json_load_buffer(text, len, path, &root);
        if (st == PS_OK) st = ps_model_from_json(root, path, opts, out);
    } else {
        const char *p = text;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        /* .layers files are layer lists; anything else that does not open like a JSON object is sniffed as one
         * too, so a user's "model.txt" works, while a broken .json still gets the JSON parser's line:column. */
        if (ends_with(path, ".layers") || (*p != '{' && !ends_with(path, ".json"))) {
            st = ps_model_from_layer_list(text, len, path, opts, out);
        } else {
            st = ps_json_load_buffer(text, len, path, &root);
            if (st == PS_OK) st = load_json_root(root, path, opts, out);
        }
    }
    json_decref(root);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

ps_status ps_model_load_json(const char *path, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    json_t *root = NULL;
    PS_TRY(ps_json_load_file(path, &root));
    ps_status st = ps_model_from_json(root, path, opts, out);
    json_decref(root);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

ps_status ps_model_load_hf_config(const char *path, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    json_t *root = NULL;
    PS_TRY(ps_json_load_file(path, &root));
    ps_status st = ps_model_from_hf(root, path, opts, out);
    json_decref(root);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

ps_status ps_model_load_layer_list(const char *path, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    PS_TRY(ps_read_file(path, &text, &len));
    ps_status st = ps_model_from_layer_list(text, len, path, opts, out);
    free(text);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

/* Message for a name that is neither a preset nor a file: the nearest preset and the whole list. */
static ps_status unknown_preset(const char *spec)
{
    char **names = NULL;
    int n = 0;
    if (ps_model_list(&names, &n) != PS_OK)
        return PS_FAIL(PS_ERR_INPUT, "unknown model '%s' and no preset folder to look in: %s", spec,
                       ps_error_message());
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < n; i++) {
        int d = ps_edit_distance(spec, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    char hint[96] = "";
    if (best && best_d <= 3) snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    char list[700];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0 || (size_t)w >= sizeof list - used) {
            /* the message slot is finite; `psearch model list` shows them all */
            snprintf(list + used, sizeof list - used, ", ...");
            break;
        }
        used += (size_t)w;
    }
    ps_status st = PS_FAIL(PS_ERR_INPUT,
                           "unknown model '%s'%s; known presets: %s (or give the path of a model JSON, a Hugging "
                           "Face config.json or a .layers file)",
                           spec, hint, list);
    ps_model_list_free(names, n);
    return st;
}

ps_status ps_model_locate(const char *spec, ps_model_source *src)
{
    memset(src, 0, sizeof *src);
    if (!spec || !*spec) return PS_FAIL(PS_ERR_INPUT, "empty model name; give a preset name or a file path");
    if (strchr(spec, '/') || ends_with(spec, ".json") || ends_with(spec, ".layers")) {
        PS_TRY(locate_path(spec, src));
        return PS_OK;
    }
    char dir[PATH_MAX];
    ps_status st = ps_data_dir("models", dir, sizeof dir);
    if (st == PS_OK) {
        char path[PATH_MAX + 80];
        int w = snprintf(path, sizeof path, "%s/%s.json", dir, spec);
        if (w > 0 && (size_t)w < sizeof path && is_file(path)) {
            PS_TRY(set_source(src, path, PS_MODEL_FILE_PRESET));
            return PS_OK;
        }
    }
    /* A bare file name in the working directory ("mymodel.txt") is a path too. */
    if (is_file(spec)) {
        PS_TRY(locate_path(spec, src));
        return PS_OK;
    }
    if (st != PS_OK) return ps_error_trace(st, __FILE__, __LINE__);
    return unknown_preset(spec);
}

ps_status ps_model_load(const char *spec, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    ps_model_source src;
    PS_TRY(ps_model_locate(spec, &src));
    char *text = NULL;
    size_t len = 0;
    PS_TRY(ps_read_file(src.path, &text, &len));
    ps_status st = ps_model_parse(&src, text, len, opts, out);
    free(text);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

/* ---- catalogue ------------------------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ps_model_list_free(char **names, int count)
{
    if (!names) return;
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

ps_status ps_model_list(char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    char dir[PATH_MAX];
    PS_TRY(ps_data_dir("models", dir, sizeof dir));
    DIR *d = opendir(dir);
    if (!d) return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot list the model presets", dir);
    char **v = NULL;
    int n = 0, cap = 0;
    ps_status st = PS_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".json")) continue;
        if (n == cap) {
            int ncap = cap ? cap * 2 : 32;
            char **nv = ps_calloc((size_t)ncap, sizeof *nv);
            if (!nv) {
                st = PS_ERR_SYSTEM;
                break;
            }
            if (n) memcpy(nv, v, (size_t)n * sizeof *nv);
            free(v);
            v = nv;
            cap = ncap;
        }
        char *s = ps_strdup(e->d_name);
        if (!s) {
            st = PS_ERR_SYSTEM;
            break;
        }
        s[strlen(s) - strlen(".json")] = '\0';
        v[n++] = s;
    }
    closedir(d);
    if (st != PS_OK) {
        ps_model_list_free(v, n);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return PS_OK;
}

/* ---- scaled copies --------------------------------------------------------------------------------------------- */

/* ceil(x / f) rounded up to a multiple of align; 0 stays 0 (a field the kind does not use). */
static int64_t shrink(int64_t x, int64_t f, int64_t align)
{
    if (x <= 0) return x;
    int64_t v = (x + f - 1) / f;
    return (v + align - 1) / align * align;
}

ps_status ps_model_scaled(const ps_model *m, int64_t f, int64_t align, ps_model *out)
{
    memset(out, 0, sizeof *out);
    PS_CHECK_INPUT(f >= 1 && align >= 1, "scale factor and alignment must be >= 1 (got %lld, %lld)", (long long)f,
                   (long long)align);
    *out = *m;
    out->layers = ps_calloc((size_t)m->n_layers, sizeof *out->layers);
    if (!out->layers) return PS_ERR_SYSTEM;
    memcpy(out->layers, m->layers, (size_t)m->n_layers * sizeof *out->layers);
    if (f > 1) {
        char suffix[24];
        snprintf(suffix, sizeof suffix, "/%lld", (long long)f);
        size_t keep = sizeof out->name - 1 - strlen(suffix), len = strlen(m->name);
        memcpy(out->name, m->name, len < keep ? len : keep);
        out->name[len < keep ? len : keep] = '\0';
        ps_strcatf(out->name, sizeof out->name, "%s", suffix);
        out->published_params = 0;
        out->published_active_params = 0;
        /* Tokens shrink like widths (seq is a multiple of align too, for sequence parallelism over tp); heads stay,
         * so every head divisibility rule of the original holds, and head_dim shrinks instead. */
        out->seq = shrink(m->seq, f, align);
        for (int64_t i = 0; i < m->n_layers; i++) {
            ps_layer *l = &out->layers[i];
            l->hidden = shrink(l->hidden, f, align);
            l->out_hidden = shrink(l->out_hidden, f, align);
            l->ffn_hidden = shrink(l->ffn_hidden, f, align);
            l->vocab = shrink(l->vocab, f, align);
            l->seq = shrink(l->seq, f, align);
            l->kv_seq = shrink(l->kv_seq, f, align);
            l->attn_window = shrink(l->attn_window, f, 1);
            l->positions = shrink(l->positions, f, 1);
            l->head_dim = shrink(l->head_dim, f, 1);
            l->expert_ffn = shrink(l->expert_ffn, f, align);
            l->shared_ffn = shrink(l->shared_ffn, f, align);
            l->q_lora_rank = shrink(l->q_lora_rank, f, align);
            l->kv_lora_rank = shrink(l->kv_lora_rank, f, align);
            l->qk_nope_head_dim = shrink(l->qk_nope_head_dim, f, 1);
            l->qk_rope_head_dim = shrink(l->qk_rope_head_dim, f, 1);
            l->v_head_dim = shrink(l->v_head_dim, f, 1);
            if (l->kv_lora_rank > 0) l->head_dim = l->qk_nope_head_dim + l->qk_rope_head_dim;
        }
    }
    ps_status st = ps_model_validate(out, out->name);
    if (st != PS_OK) ps_model_free(out);
    return st;
}
