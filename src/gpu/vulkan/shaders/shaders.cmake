# The compute-shader variants of the Vulkan backend: "name|source|defines" (defines comma-
# separated, "-" for none). Each variant is compiled by glslc into its own SPIR-V binary and
# embedded under its name (src/gpu/vulkan/vk_shaders.h).
# glslc's flags for every variant: with the variant table, all that decides the SPIR-V bytes
# (a build may reuse another's files when none of this changed: MOETIER_SPIRV_DIR).
set(MOETIER_GLSLC_FLAGS --target-env=vulkan1.1 -fshader-stage=compute -O)
set(MOETIER_SHADER_VARIANTS
  "quantize_q8_k|quantize.comp|ACT_Q8_K"
  "quantize_q8_0|quantize.comp|ACT_Q8_0"
  "quantize_f16|quantize.comp|ACT_F16"
  "quantize_bf16|quantize.comp|ACT_BF16"
)
foreach(w F32 F16 BF16 Q4_0 Q8_0 Q4_K Q5_K Q6_K IQ4_XS)
  string(TOLOWER ${w} lw)
  list(APPEND MOETIER_SHADER_VARIANTS "matmul_${lw}|matmul.comp|WTYPE_${w}")
  list(APPEND MOETIER_SHADER_VARIANTS "matmul_id_${lw}|matmul.comp|WTYPE_${w},MATMUL_ID")
  list(APPEND MOETIER_SHADER_VARIANTS "matvec_${lw}|matvec.comp|WTYPE_${w}")
  list(APPEND MOETIER_SHADER_VARIANTS "matvec_id_${lw}|matvec.comp|WTYPE_${w},MATVEC_ID")
  list(APPEND MOETIER_SHADER_VARIANTS "matvec_swiglu_${lw}|matvec.comp|WTYPE_${w},SWIGLU")
  list(APPEND MOETIER_SHADER_VARIANTS "matvec_id_swiglu_${lw}|matvec.comp|WTYPE_${w},MATVEC_ID,SWIGLU")
  list(APPEND MOETIER_SHADER_VARIANTS "matmat_${lw}|matmat.comp|WTYPE_${w}")
  list(APPEND MOETIER_SHADER_VARIANTS "matmat_id_${lw}|matmat.comp|WTYPE_${w},MATMAT_ID")
  if(NOT w MATCHES "^(F32|F16|BF16)$")
    list(APPEND MOETIER_SHADER_VARIANTS "matmat_idot_${lw}|matmat.comp|WTYPE_${w},INT_DOT")
    list(APPEND MOETIER_SHADER_VARIANTS "matmat_id_idot_${lw}|matmat.comp|WTYPE_${w},MATMAT_ID,INT_DOT")
  endif()
endforeach()
list(APPEND MOETIER_SHADER_VARIANTS
  "rms_norm|norm.comp|NORM_RMS"
  "rms_norm_quant|norm.comp|NORM_RMS,NORM_RMS_QUANT"
  "l2_norm|norm.comp|NORM_L2"
  "rope_neox|rope.comp|-"
  "add|elementwise.comp|EW_ADD"
  "silu_mul|elementwise.comp|EW_SILU_MUL"
  "copy_rows|elementwise.comp|EW_COPY_ROWS"
  "kv_store|kv_store.comp|-"
  "attention|attention.comp|-"
  "flash_attention|flash_attention.comp|-"
  "flash_attention_split|flash_attention.comp|FA_SPLIT"
  "flash_attention_reduce|flash_attention_reduce.comp|-"
  "ssm_conv|conv.comp|-"
  "delta_rule|delta_rule.comp|-"
  "delta_rule_fast|delta_rule_fast.comp|-"
  "delta_rule_fast_norm|delta_rule_fast_norm.comp|-"
  "moe_router|router.comp|-"
  "moe_group|moe_group.comp|-"
  "moe_router_fast|router_fast.comp|-"
  "moe_combine|moe_combine.comp|-"
)
# The shaders with subgroup operations again, with those emulated W wide (subgroup.glsl):
# "<name>_sg32" and "<name>_sg64", which a device opened with MOETIER_VK_SUBGROUP=W runs
# instead (vk_context.h), so that lavapipe executes what NVIDIA (32) and AMD (64) would.
set(subgroup_variants "")
foreach(entry ${MOETIER_SHADER_VARIANTS})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 source)
  list(GET parts 2 defines)
  if(source MATCHES "^(matvec|flash_attention|delta_rule_fast|delta_rule_fast_norm|router_fast)\\.comp$")
    foreach(width 32 64)
      if(defines STREQUAL "-")
        list(APPEND subgroup_variants "${name}_sg${width}|${source}|EMULATED_SUBGROUP_SIZE=${width}")
      else()
        list(APPEND subgroup_variants "${name}_sg${width}|${source}|${defines},EMULATED_SUBGROUP_SIZE=${width}")
      endif()
    endforeach()
  endif()
endforeach()
list(APPEND MOETIER_SHADER_VARIANTS ${subgroup_variants})
