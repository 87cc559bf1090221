#include "codegen/cpu/PerfMap.h"

#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

namespace kiln::cpu {
namespace {

/// Writes the map (PerfMap.h). The names come from the object file's own symbol table (JITLink's
/// graph keeps no local symbols, and most of a program's functions are local), placed at their
/// offset in the section's block once the graph is laid out.
class PerfMapPlugin final : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  void notifyMaterializing(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph& g,
                           llvm::jitlink::JITLinkContext&, llvm::MemoryBufferRef object) override {
    auto file = llvm::object::ObjectFile::createObjectFile(object);
    if (!file) return llvm::consumeError(file.takeError());  // not an object kiln can read: no names
    std::vector<Function> functions;
    for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
      auto type = sym.getType();
      auto name = sym.getName();
      auto section = sym.getSection();
      auto value = sym.getValue();
      if (!type || !name || !section || !value || *type != llvm::object::SymbolRef::ST_Function ||
          *section == (*file)->section_end()) {
        if (!type) llvm::consumeError(type.takeError());
        if (!name) llvm::consumeError(name.takeError());
        if (!section) llvm::consumeError(section.takeError());
        if (!value) llvm::consumeError(value.takeError());
        continue;
      }
      auto sectionName = (*section)->getName();
      if (!sectionName) {
        llvm::consumeError(sectionName.takeError());
        continue;
      }
      const uint64_t size = llvm::object::ELFSymbolRef(sym).getSize();
      if (size > 0) functions.push_back({name->str(), sectionName->str(), *value - (*section)->getAddress(), size});
    }
    std::lock_guard<std::mutex> lock(mutex_);
    pending_[&g] = std::move(functions);
  }
  void modifyPassConfig(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    config.PostFixupPasses.push_back([this](llvm::jitlink::LinkGraph& g) {
      write(g);
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override { return llvm::Error::success(); }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey, llvm::orc::ResourceKey) override {}

 private:
  struct Function {
    std::string name, section;
    uint64_t offset = 0, size = 0;
  };
  void write(llvm::jitlink::LinkGraph& g) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(&g);
    if (it == pending_.end()) return;
    std::string lines;
    for (const Function& f : it->second) {
      llvm::jitlink::Section* section = g.findSectionByName(f.section);
      // Code sections come as one block each (kiln emits no function sections); anything else
      // cannot be placed from a section offset, and goes unnamed.
      if (!section || section->blocks_size() != 1) continue;
      const llvm::jitlink::Block& block = **section->blocks().begin();
      if (f.offset + f.size > block.getSize()) continue;
      lines += fmt::format("{:x} {:x} {}\n", block.getAddress().getValue() + f.offset, f.size, f.name);
    }
    pending_.erase(it);
    if (!file_) file_ = std::fopen(fmt::format("/tmp/perf-{}.map", ::getpid()).c_str(), "a");
    if (!file_) return;  // a profiling aid: no map, no names, nothing else lost
    std::fputs(lines.c_str(), file_);
    std::fflush(file_);
  }
  std::mutex mutex_;
  std::map<const llvm::jitlink::LinkGraph*, std::vector<Function>> pending_;
  std::FILE* file_ = nullptr;
};

}  // namespace

bool perfMapWanted() {
  const char* v = std::getenv("KILN_PERF_MAP");
  return v && *v && std::strcmp(v, "0") != 0;
}

void addPerfMap(llvm::orc::LLJIT& jit) {
  if (auto* linker = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer()))
    linker->addPlugin(std::make_unique<PerfMapPlugin>());
}

}  // namespace kiln::cpu
