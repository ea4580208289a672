/*
 * ini_test.c - unit tests of the configuration file parser (config/ini.h).
 *
 * Usage: ini_test [path/to/cci.ini.example]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "cci.h"
#include "ini.h"
#include "unit_run.h"

static const char *example_path = "config/cci.ini.example";

static struct ini_file f;
static char err[512];

/* Parse a NUL-terminated text as buffer "t.ini". */
static int parse(const char *text)
{
	ini_free(&f);
	err[0] = '\0';
	return ini_parse_buffer("t.ini", text, strlen(text), &f, err, sizeof(err));
}

/* Write text to a fresh temporary file; its path goes to path. */
static void write_temp(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/ini_test.XXXXXX");
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void assert_empty(const struct ini_file *g)
{
	CU_ASSERT_PTR_NULL(g->path);
	CU_ASSERT_PTR_NULL(g->sections);
	CU_ASSERT_EQUAL(g->nsections, 0);
}

static void test_comments(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("# top\n; also\n[a] # after header\n"
	                            "k = v # trailing\n  # indented\nj = w\t; semi\n"), 0);
	CU_ASSERT_EQUAL_FATAL(f.nsections, 1);
	CU_ASSERT_EQUAL(f.sections[0].nkv, 2);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "v");
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "j"), "w");
}

static void test_comment_char_inside_value(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\nk = x#y;z\n"), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "x#y;z");
}

static void test_whitespace_trimmed(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("  [ dev one ]  \n\t key\t=\t two words \t\n"), 0);
	CU_ASSERT_STRING_EQUAL(f.sections[0].name, "dev one");
	CU_ASSERT_STRING_EQUAL(f.sections[0].kv[0].key, "key");
	CU_ASSERT_STRING_EQUAL(f.sections[0].kv[0].value, "two words");
}

static void test_crlf(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\r\nk = v\r\n\r\nj=w"), 0);
	CU_ASSERT_STRING_EQUAL(f.sections[0].name, "a");
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "v");
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "j"), "w");
	CU_ASSERT_EQUAL(f.sections[0].kv[1].line, 4);
}

static void test_empty_value(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\nk =\nj =   # nothing\n"), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "");
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "j"), "");
}

static void test_value_with_equals(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\nk = x=y=z\n"), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "x=y=z");
}

static void test_key_outside_section(void)
{
	CU_ASSERT_EQUAL(parse("# c\n\nmss = 1\n[a]\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:3: key \"mss\" outside any section");
	assert_empty(&f);
}

static void test_duplicate_section(void)
{
	CU_ASSERT_EQUAL(parse("\n[sm0]\nk=1\n[x]\n\n\n[sm0]\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:7: duplicate section [sm0] (first at line 2)");
	assert_empty(&f);
}

static void test_duplicate_key(void)
{
	CU_ASSERT_EQUAL(parse("[sm0]\nmss = 1\npath = /x\nmss = 2\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:4: duplicate key \"mss\" in [sm0] (first at line 2)");
}

static void test_same_key_in_two_sections(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\nk = 1\n[b]\nk = 2\n"), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "1");
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[1], "k"), "2");
}

static void test_missing_equals(void)
{
	CU_ASSERT_EQUAL(parse("[a]\nk = 1\n\n\n\n\n\n\ntransport sm\n"), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "t.ini:9: expected \"key = value\""));
}

static void test_missing_key(void)
{
	CU_ASSERT_EQUAL(parse("[a]\n = 1\n"), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "t.ini:2: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "key is missing"));
}

static void test_empty_section_name(void)
{
	CU_ASSERT_EQUAL(parse("[]\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:1: empty section name");
	CU_ASSERT_EQUAL(parse("[  \t ]\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:1: empty section name");
}

static void test_unterminated_section(void)
{
	CU_ASSERT_EQUAL(parse("[a]\n[sm0\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:2: unterminated section header (missing ']')");
	/* A comment marker after whitespace ends the line before the ']'. */
	CU_ASSERT_EQUAL(parse("[sm #0]\n"), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unterminated"));
}

static void test_text_after_section(void)
{
	CU_ASSERT_EQUAL(parse("[a] b\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:1: unexpected text \"b\" after ']'");
	CU_ASSERT_EQUAL(parse("[[a]]\n"), CCI_EINVAL);
}

/* "[a]\nk = " followed by pad 'x' bytes and eol. */
static int parse_long(size_t pad, const char *eol)
{
	size_t n = strlen("[a]\nk = ") + pad + strlen(eol) + 1;
	char *text = malloc(n);
	int rc;

	CU_ASSERT_FATAL(text != NULL);
	if (!text)
		return -1; /* unreachable, but tells the compiler text is valid */
	strcpy(text, "[a]\nk = ");
	memset(text + 8, 'x', pad);
	strcpy(text + 8 + pad, eol);
	rc = parse(text);
	free(text);
	return rc;
}

static void test_long_lines(void)
{
	/* The line "k = xxx..." is 4 + pad bytes long. */
	CU_ASSERT_EQUAL(parse_long(4092, "\n"), 0);
	CU_ASSERT_EQUAL(strlen(ini_section_get(&f.sections[0], "k")), 4092);
	CU_ASSERT_EQUAL(parse_long(4092, "\r\n"), 0);
	CU_ASSERT_EQUAL(parse_long(4093, "\n"), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:2: line longer than 4096 bytes");
	CU_ASSERT_EQUAL(parse_long(100000, ""), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "t.ini:2: line longer than 4096 bytes");
	assert_empty(&f);
}

static void test_nul_byte(void)
{
	static const char text[] = "[a]\nk = v\nj = a\0b\n";

	ini_free(&f);
	CU_ASSERT_EQUAL(ini_parse_buffer("t.ini", text, sizeof(text) - 1, &f,
	                                 err, sizeof(err)), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "t.ini:3: NUL byte"));
	assert_empty(&f);
}

static void test_unopenable_file(void)
{
	struct ini_file g = { 0 };

	CU_ASSERT_EQUAL(ini_parse_file("/nonexistent/cci.ini", &g, err, sizeof(err)),
	                CCI_ERR_NOT_FOUND);
	CU_ASSERT_STRING_EQUAL(err, "/nonexistent/cci.ini: cannot open: No such file or directory");
	assert_empty(&g);
}

static void test_directory_is_unreadable(void)
{
	struct ini_file g = { 0 };

	CU_ASSERT_EQUAL(ini_parse_file("/tmp", &g, err, sizeof(err)), CCI_ERR_NOT_FOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/tmp: cannot "));
	assert_empty(&g);
}

static void test_file_errors_name_path(void)
{
	char path[64], expect[128];
	struct ini_file g = { 0 };

	write_temp(path, sizeof(path), "[a]\nk = 1\n[a]\n");
	CU_ASSERT_EQUAL(ini_parse_file(path, &g, err, sizeof(err)), CCI_EINVAL);
	snprintf(expect, sizeof(expect), "%s:3: duplicate section [a] (first at line 1)", path);
	CU_ASSERT_STRING_EQUAL(err, expect);
	unlink(path);
}

static void test_file_parsed(void)
{
	char path[64];
	struct ini_file g = { 0 };

	write_temp(path, sizeof(path), "[sm0]\ntransport = sm\n");
	CU_ASSERT_EQUAL_FATAL(ini_parse_file(path, &g, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(g.path, path);
	CU_ASSERT_EQUAL(g.nsections, 1);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&g.sections[0], "transport"), "sm");
	ini_free(&g);
	assert_empty(&g);
	unlink(path);
}

static void test_line_numbers(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("# c\n\n[a]\n; c\nk = 1\n\n[b]\n\n\nj = 2\n"), 0);
	CU_ASSERT_EQUAL(f.sections[0].line, 3);
	CU_ASSERT_EQUAL(f.sections[0].kv[0].line, 5);
	CU_ASSERT_EQUAL(f.sections[1].line, 7);
	CU_ASSERT_EQUAL(f.sections[1].kv[0].line, 10);
	CU_ASSERT_EQUAL(parse("[a]\n\n\n\n\n\n\n\n\n\n\n\nbad\n"), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "t.ini:13: "));
}

static void test_file_order_kept(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[z]\nb=1\na=2\nc=3\n[y]\n[x]\nq=\n"), 0);
	CU_ASSERT_EQUAL_FATAL(f.nsections, 3);
	CU_ASSERT_STRING_EQUAL(f.sections[0].name, "z");
	CU_ASSERT_STRING_EQUAL(f.sections[1].name, "y");
	CU_ASSERT_STRING_EQUAL(f.sections[2].name, "x");
	CU_ASSERT_EQUAL_FATAL(f.sections[0].nkv, 3);
	CU_ASSERT_STRING_EQUAL(f.sections[0].kv[0].key, "b");
	CU_ASSERT_STRING_EQUAL(f.sections[0].kv[2].key, "c");
	CU_ASSERT_EQUAL(f.sections[1].nkv, 0);
	CU_ASSERT_STRING_EQUAL(f.path, "t.ini");
}

static void test_section_get(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("[a]\nk = 1\nkk = 2\n[b]\n"), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "kk"), "2");
	CU_ASSERT_PTR_NULL(ini_section_get(&f.sections[0], "K"));
	CU_ASSERT_PTR_NULL(ini_section_get(&f.sections[0], "missing"));
	CU_ASSERT_PTR_NULL(ini_section_get(&f.sections[1], "k"));
	CU_ASSERT_PTR_NULL(ini_section_get(NULL, "k"));
	CU_ASSERT_PTR_NULL(ini_section_get(&f.sections[0], NULL));
}

static void test_empty_input(void)
{
	CU_ASSERT_EQUAL(parse(""), 0);
	CU_ASSERT_EQUAL(f.nsections, 0);
	CU_ASSERT_EQUAL(parse("\n\n# only comments\n   \n"), 0);
	CU_ASSERT_EQUAL(f.nsections, 0);
	ini_free(&f);
	CU_ASSERT_EQUAL(ini_parse_buffer("t.ini", NULL, 0, &f, err, sizeof(err)), 0);
}

static void test_buffer_length_respected(void)
{
	/* Only the first 8 bytes are the input: the rest must not be read. */
	ini_free(&f);
	CU_ASSERT_EQUAL_FATAL(ini_parse_buffer("t.ini", "[a]\nk=12garbage", 8, &f,
	                                       err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(ini_section_get(&f.sections[0], "k"), "12");
}

static void test_bom_skipped(void)
{
	CU_ASSERT_EQUAL_FATAL(parse("\xef\xbb\xbf[a]\nk=1\n"), 0);
	CU_ASSERT_STRING_EQUAL(f.sections[0].name, "a");
}

static void test_odd_bytes_escaped(void)
{
	CU_ASSERT_EQUAL(parse("\x01\xff\n"), CCI_EINVAL);
	CU_ASSERT_PTR_NULL(strchr(err, '\n'));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\\x01\\xff"));
}

static void test_short_error_buffer(void)
{
	char small[8];

	memset(small, 'z', sizeof(small));
	ini_free(&f);
	CU_ASSERT_EQUAL(ini_parse_buffer("t.ini", "[]", 2, &f, small, sizeof(small)),
	                CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(small, "t.ini:1");
	CU_ASSERT_EQUAL(ini_parse_buffer("t.ini", "[]", 2, &f, NULL, 0), CCI_EINVAL);
}

static void test_example_config_parses(void)
{
	struct ini_file g = { 0 };
	int i;

	CU_ASSERT_EQUAL_FATAL(ini_parse_file(example_path, &g, err, sizeof(err)), 0);
	/* One live section per transport that ships built; the sections of
	 * planned transports (verbs) stay commented out. */
	CU_ASSERT_EQUAL_FATAL(g.nsections, 4);
	for (i = 0; i < g.nsections; i++) {
		static const char *const want[] = { "sm", "tcp", "sock", "ofi" };
		const char *t = ini_section_get(&g.sections[i], "transport");

		CU_ASSERT_PTR_NOT_NULL_FATAL(t);
		CU_ASSERT_STRING_EQUAL(t, want[i]);
	}
	ini_free(&g);
}

static void cleanup(void)
{
	ini_free(&f);
}

static const struct unit_test tests[] = {
	{ "# and ; comments are ignored, whole-line and trailing", test_comments },
	{ "# or ; not after whitespace is part of the value", test_comment_char_inside_value },
	{ "whitespace around names, keys and values is trimmed", test_whitespace_trimmed },
	{ "CRLF line endings are accepted", test_crlf },
	{ "an empty value is kept as an empty string", test_empty_value },
	{ "a value may contain '='", test_value_with_equals },
	{ "a key outside any section is an error naming the key", test_key_outside_section },
	{ "duplicate section is an error naming both lines", test_duplicate_section },
	{ "duplicate key in a section is an error naming both lines", test_duplicate_key },
	{ "the same key in two sections is allowed", test_same_key_in_two_sections },
	{ "a line without '=' is an error asking for key = value", test_missing_equals },
	{ "'=' without a key is an error", test_missing_key },
	{ "an empty section name is an error", test_empty_section_name },
	{ "an unterminated '[' is an error", test_unterminated_section },
	{ "text after ']' is an error", test_text_after_section },
	{ "a 4096-byte line is accepted, a longer one rejected", test_long_lines },
	{ "a NUL byte is an error naming its line", test_nul_byte },
	{ "an unopenable file is an error naming the path and cause", test_unopenable_file },
	{ "a directory is reported as unreadable", test_directory_is_unreadable },
	{ "errors in a file name the file's path", test_file_errors_name_path },
	{ "a file is parsed and keeps its path", test_file_parsed },
	{ "line numbers count blank and comment lines", test_line_numbers },
	{ "sections and keys keep file order", test_file_order_kept },
	{ "ini_section_get finds keys exactly and NULL otherwise", test_section_get },
	{ "empty or comment-only input has no sections", test_empty_input },
	{ "the parser reads only len bytes of the buffer", test_buffer_length_respected },
	{ "a UTF-8 byte order mark is skipped", test_bom_skipped },
	{ "non-printable bytes are escaped in the one-line message", test_odd_bytes_escaped },
	{ "a short or absent error buffer is never overrun", test_short_error_buffer },
	{ "the shipped example config parses: sm, tcp, sock and ofi sections",
	  test_example_config_parses },
};

int main(int argc, char **argv)
{
	int rc;

	if (argc > 1)
		example_path = argv[1];
	rc = UNIT_RUN("ini", tests);
	cleanup();
	return rc;
}
