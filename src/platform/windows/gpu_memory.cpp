// platform/gpu_memory.h on Windows: DXGI's video memory budget of the adapter whose LUID
// Vulkan reports. dxgi.dll is loaded at run time (LoadLibrary), so the binary links no DXGI
// import library and runs where DXGI is missing (then: nullopt).
#include "platform/gpu_memory.h"

#include <windows.h>

#include <dxgi1_4.h>

#include <cstring>

namespace moetier::platform {

namespace {

// Releases a COM interface at scope exit.
template <typename T>
struct ComRef {
  T* p = nullptr;
  ~ComRef() {
    if (p != nullptr) p->Release();
  }
  ComRef() = default;
  ComRef(const ComRef&) = delete;
  ComRef& operator=(const ComRef&) = delete;
};

}  // namespace

std::optional<GpuMemoryBudget> gpu_memory_budget(const std::array<uint8_t, 8>& luid) {
  // Loaded once for the process and kept (a system DLL; unloading it gains nothing).
  static const HMODULE dxgi = ::LoadLibraryW(L"dxgi.dll");
  if (dxgi == nullptr) return std::nullopt;
  using CreateFactory1 = HRESULT(WINAPI*)(REFIID, void**);
  const auto create = reinterpret_cast<CreateFactory1>(reinterpret_cast<void*>(::GetProcAddress(dxgi, "CreateDXGIFactory1")));
  if (create == nullptr) return std::nullopt;
  ComRef<IDXGIFactory1> factory;
  if (FAILED(create(__uuidof(IDXGIFactory1), reinterpret_cast<void**>(&factory.p)))) return std::nullopt;
  for (UINT i = 0;; ++i) {
    ComRef<IDXGIAdapter1> adapter;
    if (factory.p->EnumAdapters1(i, &adapter.p) == DXGI_ERROR_NOT_FOUND) return std::nullopt;
    if (adapter.p == nullptr) continue;
    DXGI_ADAPTER_DESC1 desc{};
    if (FAILED(adapter.p->GetDesc1(&desc))) continue;
    // A LUID is {DWORD LowPart; LONG HighPart}; Vulkan's deviceLUID holds the same 8 bytes.
    static_assert(sizeof(desc.AdapterLuid) == 8);
    if (std::memcmp(&desc.AdapterLuid, luid.data(), 8) != 0) continue;
    ComRef<IDXGIAdapter3> adapter3;  // Windows 10 and later
    if (FAILED(adapter.p->QueryInterface(__uuidof(IDXGIAdapter3), reinterpret_cast<void**>(&adapter3.p)))) {
      return std::nullopt;
    }
    DXGI_QUERY_VIDEO_MEMORY_INFO info{};
    if (FAILED(adapter3.p->QueryVideoMemoryInfo(0, DXGI_MEMORY_SEGMENT_GROUP_LOCAL, &info))) return std::nullopt;
    return GpuMemoryBudget{.budget_bytes = info.Budget, .used_bytes = info.CurrentUsage};
  }
}

}  // namespace moetier::platform
