// kiln::aot::Library — a library written by exportLibrary (or `kiln aot`) opened with dlopen from
// C++, its NAME_* functions resolved by name: for tests, benchmarks and programs that pick a model
// library at run time. Contexts are `void*`; destroy every context before the Library goes away
// (dlclose unmaps the code its worker threads run).
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::aot {

struct TensorInfo {
  const char* name;
  int dtype;
  int rank;
  const int64_t* shape;
  int64_t numel;
  size_t bytes;
};

class Library {
 public:
  using Create = int (*)(void**, const char*, int);
  using Destroy = void (*)(void*);
  using Message = const char* (*)();
  using Threads = int (*)(const void*);
  using LoadWeights = int (*)(void*, const char*);
  using SaveWeights = int (*)(const void*, const char*);
  using GetParam = int (*)(const void*, const char*, void*, size_t);
  using SetParam = int (*)(void*, const char*, const void*, size_t);
  using Run = int (*)(void*, const void* const*, void* const*);
  using Output = const void* (*)(const void*, int);
  using Info = int (*)(int, TensorInfo*);
  using Forward = int (*)(void*, const void*, void*);
  using TrainStep = int (*)(void*, const void*, const void*, float, float*);

  /// Opens `path` (RTLD_NOW | RTLD_LOCAL) and resolves NAME_*; std::runtime_error when it cannot.
  Library(const std::string& path, const std::string& name) : name_(name) {
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    create = get<Create>("create");
    destroy = get<Destroy>("destroy");
    errorMessage = get<Message>("error_message");
    numThreads = get<Threads>("num_threads");
    loadWeights = get<LoadWeights>("load_weights");
    saveWeights = get<SaveWeights>("save_weights");
    getParam = get<GetParam>("get_param");
    setParam = get<SetParam>("set_param");
    run = get<Run>("run");
    output = get<Output>("output");
    inputInfo = get<Info>("input_info");
    outputInfo = get<Info>("output_info");
    paramInfo = get<Info>("param_info");
    forward = reinterpret_cast<Forward>(symbol(name + "_forward"));
    trainStep = reinterpret_cast<TrainStep>(symbol(name + "_train_step"));
  }
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// Any symbol the library exports (null when it does not).
  void* symbol(const std::string& s) const { return ::dlsym(handle_, s.c_str()); }

  Create create;
  Destroy destroy;
  Message errorMessage;
  Threads numThreads;
  LoadWeights loadWeights;
  SaveWeights saveWeights;
  GetParam getParam;
  SetParam setParam;
  Run run;
  Output output;
  Info inputInfo, outputInfo, paramInfo;
  Forward forward = nullptr;      // inference libraries with one input
  TrainStep trainStep = nullptr;  // training libraries

 private:
  template <typename F>
  F get(const std::string& suffix) {
    void* p = symbol(name_ + "_" + suffix);
    if (!p) throw std::runtime_error("the library exports no " + name_ + "_" + suffix);
    return reinterpret_cast<F>(p);
  }
  std::string name_;
  void* handle_ = nullptr;
};

}  // namespace kiln::aot
