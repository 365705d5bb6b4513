// One function per subcommand; argv starts after the subcommand name.
#pragma once
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_score(int argc, char **argv);
