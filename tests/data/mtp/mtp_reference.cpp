// Dump llama.cpp MTP (nextn) draft-head reference data for a qwen35moe GGUF.
// Reproduces the flow of common_speculative_impl_draft_mtp (common/speculative.cpp @ 3f545becc):
//   target ctx (embeddings_nextn unmasked) -> prompt decode -> process() catch-up decode on the MTP ctx
//   -> draft() loop (greedy, 3 steps).
//
// usage: mtpref <model.gguf> <A|B> <out.json> [--mode mtp|target] [--no-load-mtp] [--tgt-logits last|all]
#include "llama-ext.h"
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::string sha256_of(const std::string & path) {
    std::string cmd = "sha256sum '" + path + "'";
    FILE * p = popen(cmd.c_str(), "r");
    if (!p) return "";
    char buf[256] = {0};
    std::string out;
    if (fgets(buf, sizeof(buf), p)) out = buf;
    pclose(p);
    auto sp = out.find(' ');
    return sp == std::string::npos ? out : out.substr(0, sp);
}

static void write_vec(FILE * f, const float * v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; ++i) {
        if (i) fputc(',', f);
        fprintf(f, "%.9g", v[i]);
    }
    fputc(']', f);
}

static int argmax(const float * v, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) if (v[i] > v[best]) best = i;
    return best;
}

// same as common_batch_clear / common_batch_add
static void batch_clear(llama_batch & b) { b.n_tokens = 0; }
static void batch_add(llama_batch & b, llama_token id, llama_pos pos, llama_seq_id seq, bool logits) {
    b.token[b.n_tokens]     = id;
    b.pos[b.n_tokens]       = pos;
    b.n_seq_id[b.n_tokens]  = 1;
    b.seq_id[b.n_tokens][0] = seq;
    b.logits[b.n_tokens]    = logits;
    b.n_tokens++;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s model.gguf A|B out.json [--mode mtp|target] [--no-load-mtp] [--tgt-logits last|all]\n", argv[0]);
        return 1;
    }
    const std::string model_path = argv[1];
    const std::string which      = argv[2];
    const std::string out_path   = argv[3];
    std::string mode = "mtp";
    bool load_mtp    = true;
    bool tgt_all     = true;
    for (int i = 4; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--mode" && i + 1 < argc)            mode = argv[++i];
        else if (a == "--no-load-mtp")                load_mtp = false;
        else if (a == "--tgt-logits" && i + 1 < argc) tgt_all = std::string(argv[++i]) == "all";
        else { fprintf(stderr, "bad arg %s\n", a.c_str()); return 1; }
    }
    const bool do_mtp = mode == "mtp";

    std::vector<llama_token> prompt;
    if (which == "A") {
        prompt = {1, 15, 200, 7, 99, 42, 3, 250, 18, 77, 5, 140};
    } else if (which == "B") {
        for (int i = 0; i < 40; ++i) prompt.push_back(i * 37 % 260 + 1);
    } else {
        fprintf(stderr, "prompt must be A or B\n");
        return 1;
    }

    llama_backend_init();

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    mparams.load_mtp     = load_mtp;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mparams);
    if (!model) { fprintf(stderr, "load failed\n"); return 1; }

    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_embd  = llama_model_n_embd_out(model);
    for (auto t : prompt) if (t >= n_vocab) { fprintf(stderr, "token %d >= vocab %d\n", t, n_vocab); return 1; }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = 512;
    cparams.n_batch         = 512;
    cparams.n_ubatch        = 512;
    cparams.n_threads       = 2;
    cparams.n_threads_batch = 2;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cparams.type_k = GGML_TYPE_F32; cparams.type_v = GGML_TYPE_F32;  // f32 KV: the F32 models compare at float precision
    const char * kv_type = ggml_type_name(cparams.type_k);
    const char * kv_type_v = ggml_type_name(cparams.type_v);

    llama_context * ctx_tgt = llama_init_from_model(model, cparams);
    if (!ctx_tgt) { fprintf(stderr, "ctx_tgt failed\n"); return 1; }

    llama_context * ctx_dft = nullptr;
    if (do_mtp) {
        llama_context_params dparams = cparams;
        dparams.ctx_type  = LLAMA_CONTEXT_TYPE_MTP;
        dparams.n_ctx     = llama_n_ctx(ctx_tgt);
        dparams.n_rs_seq  = 0;
        dparams.ctx_other = ctx_tgt;
        ctx_dft = llama_init_from_model(model, dparams);
        if (!ctx_dft) { fprintf(stderr, "ctx_dft failed\n"); return 1; }
        llama_set_embeddings_nextn(ctx_tgt, true, /*masked*/ false);
        llama_set_embeddings_nextn(ctx_dft, true, /*masked*/ true);
        fprintf(stderr, "ctx_other(ctx_dft)==ctx_tgt: %d (is_mem_shared)\n", llama_get_ctx_other(ctx_dft) == ctx_tgt);
    }

    const int n = (int) prompt.size();

    // 3. target prompt decode
    llama_batch bt = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) batch_add(bt, prompt[i], i, 0, tgt_all || i == n - 1);
    if (llama_decode(ctx_tgt, bt) != 0) { fprintf(stderr, "tgt decode failed\n"); return 1; }
    std::vector<float> tgt_logits(llama_get_logits_ith(ctx_tgt, n - 1), llama_get_logits_ith(ctx_tgt, n - 1) + n_vocab);
    const llama_token t = argmax(tgt_logits.data(), n_vocab);

    std::vector<float> h_tgt;
    std::vector<llama_token> drafts;
    std::vector<std::vector<float>> L, H;

    if (do_mtp) {
        const float * h = llama_get_embeddings_nextn(ctx_tgt);
        if (!h) { fprintf(stderr, "no tgt nextn embeddings\n"); return 1; }
        h_tgt.assign(h, h + (size_t) n * n_embd);

        // as in the draft-mtp ctor: batch with both embd and token
        const int32_t n_b = (int32_t) llama_n_batch(ctx_dft);
        llama_batch batch = llama_batch_init(n_b, n_embd, 1);
        batch.token = (llama_token *) malloc(sizeof(llama_token) * n_b);

        // 4. process(): catch-up decode, h shifted right by one, row 0 = pending_h (zeros)
        batch_clear(batch);
        for (int k = 0; k < n; ++k) batch_add(batch, prompt[k], k, 0, false);
        std::memcpy(batch.embd + (size_t) n_embd, h_tgt.data(), sizeof(float) * n_embd * (n - 1));
        std::memset(batch.embd, 0, sizeof(float) * n_embd);
        if (llama_decode(ctx_dft, batch) != 0) { fprintf(stderr, "dft catch-up decode failed\n"); return 1; }
        std::vector<float> pending_h(h_tgt.end() - n_embd, h_tgt.end()); // last h row (via _ith in llama.cpp)
        {
            const float * hl = llama_get_embeddings_nextn_ith(ctx_tgt, n - 1);
            if (std::memcmp(hl, pending_h.data(), sizeof(float) * n_embd) != 0) fprintf(stderr, "WARN: _ith(n-1) != row n-1\n");
        }

        // 5. draft(): 3 greedy steps
        batch_clear(batch);
        batch_add(batch, t, n, 0, true);
        std::memcpy(batch.embd, pending_h.data(), sizeof(float) * n_embd);
        int i_last = 0;
        for (int i = 0; i < 3; ++i) {
            if (llama_decode(ctx_dft, batch) != 0) { fprintf(stderr, "dft decode %d failed\n", i); return 1; }
            const float * lg = llama_get_logits_ith(ctx_dft, i_last);
            const float * hr = llama_get_embeddings_nextn_ith(ctx_dft, i_last);
            if (!lg || !hr) { fprintf(stderr, "missing dft output\n"); return 1; }
            L.emplace_back(lg, lg + n_vocab);
            H.emplace_back(hr, hr + n_embd);
            const llama_token d = argmax(lg, n_vocab);
            drafts.push_back(d);
            batch_clear(batch);
            batch_add(batch, d, n + i + 1, 0, true);
            std::memcpy(batch.embd, H.back().data(), sizeof(float) * n_embd);
            i_last = 0;
        }
        free(batch.token);
        batch.token = nullptr;
        llama_batch_free(batch);
    }

    FILE * f = fopen(out_path.c_str(), "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", out_path.c_str()); return 1; }
    std::string base = model_path.substr(model_path.find_last_of('/') + 1);
    fprintf(f, "{\"model\": \"%s\", \"model_sha256\": \"%s\", \"llama_cpp_commit\": \"3f545becc\", ",
            base.c_str(), sha256_of(model_path).c_str());
    fprintf(f, "\"kv_type\": \"%s/%s\", \"flash_attn\": false, \"n_threads\": 2, \"n_ctx\": 512, \"load_mtp\": %s, \"mode\": \"%s\", ",
            kv_type, kv_type_v, load_mtp ? "true" : "false", mode.c_str());
    fprintf(f, "\"prompt\": [");
    for (int i = 0; i < n; ++i) fprintf(f, "%s%d", i ? "," : "", prompt[i]);
    fprintf(f, "], \"target_last_logits\": ");
    write_vec(f, tgt_logits.data(), n_vocab);
    fprintf(f, ", \"next_token\": %d", t);
    if (do_mtp) {
        fprintf(f, ", \"draft_tokens\": [%d,%d,%d]", drafts[0], drafts[1], drafts[2]);
        fprintf(f, ", \"mtp_logits\": [");
        for (size_t i = 0; i < L.size(); ++i) { if (i) fputc(',', f); write_vec(f, L[i].data(), n_vocab); }
        fprintf(f, "], \"mtp_hidden\": [");
        for (size_t i = 0; i < H.size(); ++i) { if (i) fputc(',', f); write_vec(f, H[i].data(), n_embd); }
        fprintf(f, "], \"target_hidden_last\": ");
        write_vec(f, h_tgt.data() + (size_t) (n - 1) * n_embd, n_embd);
    }
    fprintf(f, "}\n");
    fclose(f);

    if (ctx_dft) llama_free(ctx_dft);
    llama_free(ctx_tgt);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
