# A stand-in for just enough of Homebrew's formula DSL to load the
# release's formula and say, as JSON, what it declares for one platform:
#
#   ruby formula_dsl.rb FORMULA macos|linux arm|intel BIN_DIR
#
# It runs the formula's install (recording what it installs), reads its
# service block, and runs its test block with BIN_DIR as bin (the Go test
# puts this machine's release binary there, for this machine's platform).
require "json"
require "pathname"

PLATFORM_OS, PLATFORM_CPU = ARGV[1], ARGV[2]
BIN_DIR = Pathname(ARGV[3])

module OS
  def self.mac? = PLATFORM_OS == "macos"
  def self.linux? = PLATFORM_OS == "linux"
end

module Hardware
  module CPU
    def self.arm? = PLATFORM_CPU == "arm"
    def self.intel? = PLATFORM_CPU == "intel"
  end
end

class Formula
  INFO = { "urls" => [], "sha256s" => [] }

  class << self
    def inherited(k) = INFO[:class] = k
    def desc(s) = INFO["desc"] = s
    def homepage(s) = INFO["homepage"] = s
    def version(s = nil) = s.nil? ? INFO["version"] : INFO["version"] = s
    def license(s) = INFO["license"] = s
    def url(s) = INFO["urls"] << s
    def sha256(s) = INFO["sha256s"] << s
    def on_macos = (yield if OS.mac?)
    def on_linux = (yield if OS.linux?)
    def on_arm = (yield if Hardware::CPU.arm?)
    def on_intel = (yield if Hardware::CPU.intel?)
    def service(&blk) = INFO[:service] = blk
    def test(&blk) = INFO[:test] = blk
  end

  # What install does, recorded.
  class Dir
    def initialize(path, log) = (@path, @log = Pathname(path), log)
    def install(spec) = @log << ["install", @path.to_s, spec]
    def /(other) = @path / other
    def mkpath = @log << ["mkpath", @path.to_s]
    def to_s = @path.to_s
  end

  def initialize = @log = []
  def log = @log
  def version = self.class.version
  def bin = (@phase == :test ? BIN_DIR : Dir.new("/prefix/bin", @log))
  def man1 = Dir.new("/prefix/share/man/man1", @log)
  def opt_bin = Pathname("/opt/homebrew/opt/mcp-reconnect/bin")
  def var = Pathname("/opt/homebrew/var")
  def generate_completions_from_executable(*args) = @log << ["completions", *args.map(&:to_s)]
  def system(*args) = @log << ["system", *args.map(&:to_s)]

  def shell_output(cmd)
    out = `#{cmd}`
    raise "#{cmd} exited #{$?.exitstatus}" unless $?.success?
    out
  end

  def assert_match(want, got)
    raise "test: #{got.inspect} does not match #{want.inspect}" unless got.match?(want)
    @log << ["assert_match", want]
  end

  # The service block's own DSL.
  class Service
    attr_reader :spec
    def initialize(formula) = (@f, @spec = formula, {})
    def run(args) = @spec["run"] = Array(args).map(&:to_s)
    def keep_alive(v) = @spec["keep_alive"] = v
    def log_path(p) = @spec["log_path"] = p.to_s
    def error_log_path(p) = @spec["error_log_path"] = p.to_s
    def method_missing(name, *args) = @f.send(name, *args)
    def respond_to_missing?(*) = true
  end

  def self.report
    f = INFO[:class].new
    f.install
    svc = Service.new(f)
    svc.instance_eval(&INFO[:service])
    out = { "class" => INFO[:class].name, "desc" => INFO["desc"], "homepage" => INFO["homepage"], "version" => INFO["version"], "license" => INFO["license"],
            "urls" => INFO["urls"], "sha256s" => INFO["sha256s"], "install" => f.log.dup, "service" => svc.spec }
    if BIN_DIR.join("mcp-reconnect").exist?
      f.log.clear
      f.instance_variable_set(:@phase, :test)
      f.instance_eval(&INFO[:test])
      out["test"] = f.log
    end
    puts JSON.generate(out)
  end
end

load ARGV[0]
Formula.report
