// Subcommands of the `moetier` binary. Each takes the arguments after the command name
// (argv[0] is the command itself) and returns the process exit status:
// 0 success, 1 runtime failure, 2 bad usage or bad input.
#pragma once

namespace moetier {

int cmd_inspect(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_tune(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_eval(int argc, char** argv);

// Print "moetier: <message>" to stderr and return the status's exit code.
class Status;
int report_error(const Status& status);

}  // namespace moetier
