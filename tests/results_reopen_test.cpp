// Results reopened read-write (resume, `runner eval`): nothing is lost, series continue, metric
// series are cut back to a checkpoint's rows, string datasets and attributes at paths round-trip,
// and groups move (a resume sets its stale evaluations aside).
#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "results/lock.hpp"
#include "testing/testing.hpp"

namespace {
using attnlab::ResultsError;
using attnlab::results::Results;
using attnlab::results::ResultsReader;
using attnlab::results::Status;

class ResultsReopen : public attnlab::testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    dir_ = attnlab::testutil::temp_dir("attnlab-reopen");
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(ResultsReopen, KeepsEverythingAndContinuesSeries) {
  const auto path = file("run.h5");
  {
    Results r(path, "exp");
    r.write_config("a: 1\n");
    r.append_metric("train", "loss", 3.0);
    r.append_metric("train", "loss", 2.0);
    r.set_attr("error", "boom");
    r.set_status(Status::Failed);
  }
  {
    Results r(path, Results::Open::Existing);
    r.set_status(Status::Running);
    r.append_metric("train", "loss", 1.0);
  }
  ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("experiment"), "exp");
  EXPECT_EQ(rd.status(), Status::Running);
  EXPECT_FALSE(rd.has_attr("finished"));
  EXPECT_FALSE(rd.has_attr("error"));  // a resumed run is no longer failed
  EXPECT_EQ(rd.config(), "a: 1\n");
  EXPECT_EQ(rd.metric("train", "loss"), (std::vector<double>{3.0, 2.0, 1.0}));
}

TEST_F(ResultsReopen, TruncatesSeriesToACheckpointsRows) {
  const auto path = file("cut.h5");
  std::map<std::string, int64_t> at_checkpoint;
  {
    Results r(path, "exp");
    for (int i = 0; i < 2; ++i) r.append_metric("train", "loss", i);
    for (int i = 0; i < 5; ++i) r.append_metric("step", "lr", i);
    at_checkpoint = r.metric_rows();
    EXPECT_EQ(at_checkpoint, (std::map<std::string, int64_t>{{"step/lr", 5}, {"train/loss", 2}}));
    for (int i = 0; i < 3; ++i) r.append_metric("step", "lr", 10 + i);  // a cut-short epoch
    r.append_metric("val", "bleu", 1.0);                                 // begun after the checkpoint
  }
  {
    Results r(path, Results::Open::Existing);
    r.truncate_metrics(at_checkpoint);
    r.append_metric("step", "lr", 99);
    EXPECT_THROW(r.truncate_metrics({{"train/loss", 7}, {"step/lr", 6}}), ResultsError);
  }
  ResultsReader rd(path);
  EXPECT_EQ(rd.metric("step", "lr"), (std::vector<double>{0, 1, 2, 3, 4, 99}));
  EXPECT_EQ(rd.metric("train", "loss").size(), 2u);
  EXPECT_EQ(rd.metric_names("val").size(), 0u);
}

TEST_F(ResultsReopen, StringsAndAttributesAtPaths) {
  const auto path = file("eval.h5");
  {
    Results r(path, "exp");
    r.write_strings("eval/test/hypotheses", {"a b", "", "ü"});
    r.set_attr_at("eval/test", "bleu", 12.5);
    r.set_attr_at("eval/test", "signature", std::string("nrefs:1|tok:13a"));
    r.set_attr_at("eval/test", "sentences", int64_t{3});
    r.set_attr_at("/eval/test/hypotheses", "note", std::string("on a dataset"));
    r.set_attr_at("eval/test", "bleu", 13.0);  // replaces
    EXPECT_THROW(r.write_strings("", {"x"}), ResultsError);
  }
  ResultsReader rd(path);
  EXPECT_EQ(rd.strings("eval/test/hypotheses"), (std::vector<std::string>{"a b", "", "ü"}));
  EXPECT_EQ(rd.attr_double_at("eval/test", "bleu"), 13.0);
  EXPECT_EQ(rd.attr_double_at("eval/test", "sentences"), 3.0);
  EXPECT_EQ(rd.attr_string_at("eval/test", "signature"), "nrefs:1|tok:13a");
  EXPECT_EQ(rd.attr_string_at("eval/test/hypotheses", "note"), "on a dataset");
  EXPECT_THROW(rd.attr_double_at("eval/test", "absent"), ResultsError);
}

TEST_F(ResultsReopen, RefusesWhatIsNotAResultsFile) {
  auto message = [](const std::string& path) {
    try {
      Results r(path, Results::Open::Existing);
    } catch (const ResultsError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(file("absent.h5")).find("no such file"), std::string::npos);
  // A folder is named as one ("no such file" sent people looking for a missing file).
  EXPECT_EQ(message(dir_), "not an attnlab results file: " + dir_ + " (it is a directory, not a regular file)");
  std::ofstream(file("text.h5")) << "not hdf5";
  EXPECT_NE(message(file("text.h5")).find("not an HDF5 file"), std::string::npos);
}

// Not foreign, but busy: a file whose writer lock a live process holds is named as being written
// (by whom), both to a reader (HDF5 cannot read a file that was only just created) and to a second
// writer. The lock is taken here on another open file description, as another process would.
TEST_F(ResultsReopen, AFileBeingWrittenIsNamedAsSuchNotCalledForeign) {
  const auto path = file("live.h5");
  std::ofstream(path) << "";  // created, nothing written yet
  attnlab::results::WriterLock lock(path);
  const auto pid = fmt::format("(pid {})", ::getpid());
  try {
    ResultsReader reader(path);
    FAIL() << "a file being written was read";
  } catch (const ResultsError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is being written by a running run " + pid), std::string::npos) << message;
    EXPECT_EQ(message.find("not an attnlab results file"), std::string::npos) << message;
  }
  try {
    Results writer(path, Results::Open::Existing);
    FAIL() << "a second writer opened a file being written";
  } catch (const ResultsError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("another run is writing " + path + " " + pid + "; ", 0), 0u) << e.what();
  }
}

// A results file the user may not write is named read-only when reopened for writing (`runner
// eval`, `--resume`), and still reads. Root writes through mode bits, so as root the file is made
// immutable (chattr +i; the test fails if the file system cannot).
TEST_F(ResultsReopen, AReadOnlyFileIsNamedReadOnlyAndStillReads) {
  const auto path = file("done.h5");
  {
    Results r(path, "exp");
    r.set_status(Status::Completed);
  }
  const bool root = ::geteuid() == 0;
  const auto chattr = [&](const char* flag) { return std::system(fmt::format("chattr {} '{}' 2>&1", flag, path).c_str()); };
  if (root) {
    ASSERT_EQ(chattr("+i"), 0) << "chattr +i " << path << " failed: cannot make a file read-only for root here";
  } else {
    ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  }
  struct Restore {
    std::function<void()> undo;
    ~Restore() { undo(); }
  } restore{[&] { root ? (void)chattr("-i") : (void)::chmod(path.c_str(), 0644); }};
  try {
    Results r(path, Results::Open::Existing);
    FAIL() << "a read-only file was opened for writing";
  } catch (const ResultsError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("results file " + path + " is read-only (", 0), 0u) << message;
    EXPECT_EQ(message.find("not an attnlab results file"), std::string::npos) << message;
  }
  ResultsReader reader(path);
  EXPECT_EQ(reader.status(), Status::Completed);
}

TEST_F(ResultsReopen, MovesGroupsReplacingTheTargetAndListsChildren) {
  const std::string path = file("move.h5");
  {
    Results r(path, "move");
    r.write_strings("eval/test/hypotheses", {"new"});
    r.set_attr_at("eval/test", "bleu", 12.5);
    r.write_strings("eval/val/hypotheses", {"v"});
    r.write_strings("old/test/hypotheses", {"older", "longer"});
    EXPECT_EQ(r.children("eval"), (std::vector<std::string>{"test", "val"}));
    EXPECT_TRUE(r.children("absent").empty());
    r.move("eval/test", "old/test");         // replaces what old/test held
    r.move("eval/val", "deeper/still/val");  // parents made on the way
    EXPECT_THROW(r.move("eval/test", "elsewhere"), ResultsError);
    EXPECT_THROW(r.move("old", "old/inside"), ResultsError);
    EXPECT_THROW(r.move("old", "/old"), ResultsError);
  }
  ResultsReader in(path);
  EXPECT_TRUE(in.children("eval").empty());
  EXPECT_EQ(in.strings("old/test/hypotheses"), (std::vector<std::string>{"new"}));
  EXPECT_EQ(in.attr_double_at("old/test", "bleu"), 12.5);
  EXPECT_EQ(in.strings("deeper/still/val/hypotheses"), (std::vector<std::string>{"v"}));
}

}  // namespace
