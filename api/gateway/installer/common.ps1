# Shared by install.ps1 and uninstall.ps1: the gateway splices this file into either script in
# place of its marker line when it serves it, so each served script stays self-contained.

$HomeDir = if ($env:USERPROFILE) { $env:USERPROFILE } else { $HOME }
$Utf8NoBom = New-Object System.Text.UTF8Encoding $false

function Fail([string]$Message) { throw "error: $Message" }

$Summary = New-Object System.Collections.Generic.List[string]
# One line per step, printed now and again at the end; status: ok | skipped | would change.
function Add-Summary([string]$Status, [string]$Step, [string]$Text) {
    $line = '{0,-14} {1,-7} {2}' -f "[$Status]", $Step, $Text
    $Summary.Add($line)
    Write-Host $line
}

function Read-Answer([string]$Prompt, [string]$Default = '', [switch]$Secret) {
    $p = if ($Default) { "$Prompt [$Default]" } else { $Prompt }
    if ($Secret) {
        $s = Read-Host -Prompt $p -AsSecureString
        $ptr = [Runtime.InteropServices.Marshal]::SecureStringToBSTR($s)
        try { $a = [Runtime.InteropServices.Marshal]::PtrToStringBSTR($ptr) } finally { [Runtime.InteropServices.Marshal]::ZeroFreeBSTR($ptr) }
    } else {
        $a = Read-Host -Prompt $p
    }
    if ($null -eq $a) { $a = '' }
    $a = $a.Trim()
    if (-not $a) { $a = $Default }
    return $a
}

function Split-List([string[]]$Values) {
    return @($Values | ForEach-Object { "$_" -split '[,\s]+' } | Where-Object { $_ })
}

function Get-Tilde([string]$Path) {
    if ($Path.StartsWith($HomeDir + [IO.Path]::DirectorySeparatorChar)) { return '~' + $Path.Substring($HomeDir.Length) }
    return $Path
}

function Read-Text([string]$Path) {
    if (Test-Path -LiteralPath $Path -PathType Leaf) { return [IO.File]::ReadAllText($Path) }
    return $null
}

function Get-Newline([string]$Text) { if ($Text -and $Text.Contains("`r`n")) { return "`r`n" }; return "`n" }

# Literal API keys of other providers (our own entries are removed before this is asked).
function Test-ForeignKey([string]$Text) {
    if (-not $Text) { return $false }
    $q = "[`"']?"
    return ($Text -cmatch '(^|[^A-Za-z0-9_-])(sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})') -or
        ($Text -cmatch "(OPENAI|ANTHROPIC|GEMINI|GOOGLE|MISTRAL|GROQ|XAI|DEEPSEEK|OPENROUTER|TOGETHER|COHERE|PERPLEXITY|FIREWORKS|AZURE_OPENAI)_API_KEY$q\s*[:=]\s*$q[A-Za-z0-9]") -or
        ($Text -cmatch "ANTHROPIC_AUTH_TOKEN$q\s*[:=]\s*$q[A-Za-z0-9]")
}

# The text without the gateway blocks (and, with -Restore, with commented-out lines restored).
# Found: something of ours was there; Broken: a block is not closed (Text is then unchanged).
function Remove-GatewayBlocks([string]$Text, [switch]$Restore) {
    if ($null -eq $Text) { return @{ Text = ''; Found = $false; Broken = $false } }
    $nl = Get-Newline $Text
    $out = New-Object System.Collections.Generic.List[string]
    $skip = $false; $found = $false
    foreach ($line in ($Text -split "`r?`n")) {
        if ($skip) { if ($line -ceq $MarkEnd) { $skip = $false }; continue }
        if ($line -ceq $MarkBegin) { $skip = $true; $found = $true; continue }
        if ($Restore -and $line.StartsWith($DisabledPrefix)) { $out.Add($line.Substring($DisabledPrefix.Length)); $found = $true; continue }
        $out.Add($line)
    }
    if ($skip) { return @{ Text = $Text; Found = $false; Broken = $true } }
    if (-not $found) { return @{ Text = $Text; Found = $false; Broken = $false } }
    return @{ Text = ($out -join $nl); Found = $true; Broken = $false }
}

# Claude Code settings: the gateway entry is env.ANTHROPIC_BASE_URL pointing here (or a gateway
# key as token) with its token and model. Returns @{ Stripped; New } texts, or @{ Error }.
function Edit-ClaudeSettings([string]$Raw, [bool]$Set) {
    if ($Raw -and $Raw.Trim()) {
        try { $data = $Raw | ConvertFrom-Json } catch { return @{ Error = "not valid JSON: $($_.Exception.Message)" } }
    } else {
        $data = [pscustomobject]@{}
    }
    if ($data -isnot [System.Management.Automation.PSCustomObject]) { return @{ Error = 'not a JSON object' } }
    $before = ConvertTo-Json $data -Depth 100 -Compress
    $envProp = $data.PSObject.Properties['env']
    if ($envProp -and $null -ne $envProp.Value -and $envProp.Value -isnot [System.Management.Automation.PSCustomObject]) { return @{ Error = '"env" is not an object' } }
    if ($envProp -and $envProp.Value) {
        $e = $envProp.Value
        $url = $e.PSObject.Properties['ANTHROPIC_BASE_URL']
        $tok = $e.PSObject.Properties['ANTHROPIC_AUTH_TOKEN']
        if ($url -and $url.Value -and ($url.Value -eq $BaseUrl -or ($tok -and "$($tok.Value)" -match '^(gw_ai_|rk_live_|mt-)'))) {
            foreach ($k in $ClaudeKeys) { $e.PSObject.Properties.Remove($k) }
            if (@($e.PSObject.Properties).Count -eq 0) { $data.PSObject.Properties.Remove('env') }
        }
    }
    $strippedJson = ConvertTo-Json $data -Depth 100 -Compress
    $stripped = if ($strippedJson -eq $before) { $Raw } else { (ConvertTo-Json $data -Depth 100) + "`n" }
    if (-not $Set) { return @{ Stripped = $stripped; New = $stripped } }
    if (-not $data.PSObject.Properties['env']) { $data | Add-Member -NotePropertyName env -NotePropertyValue ([pscustomobject]@{}) }
    $data.env | Add-Member -NotePropertyName ANTHROPIC_BASE_URL -NotePropertyValue $BaseUrl -Force
    $data.env | Add-Member -NotePropertyName ANTHROPIC_AUTH_TOKEN -NotePropertyValue $Key -Force
    $data.env | Add-Member -NotePropertyName ANTHROPIC_MODEL -NotePropertyValue $DefaultModel -Force
    $new = if ((ConvertTo-Json $data -Depth 100 -Compress) -eq $before) { $Raw } else { (ConvertTo-Json $data -Depth 100) + "`n" }
    return @{ Stripped = $stripped; New = $new }
}

# llm's keys.json: the key named "gateway" (which the gateway's extra-openai-models.yaml entries
# name) is ours when it holds a gateway key. Returns @{ Stripped; New } texts, or @{ Error }.
function Edit-LlmKeys([string]$Raw, [bool]$Set) {
    if ($Raw -and $Raw.Trim()) {
        try { $data = $Raw | ConvertFrom-Json } catch { return @{ Error = "not valid JSON: $($_.Exception.Message)" } }
    } else {
        $data = [pscustomobject]@{}
    }
    if ($data -isnot [System.Management.Automation.PSCustomObject]) { return @{ Error = 'not a JSON object' } }
    $before = ConvertTo-Json $data -Depth 100 -Compress
    $gw = $data.PSObject.Properties['gateway']
    if ($gw -and "$($gw.Value)" -match '^(gw_ai_|rk_live_|mt-)') { $data.PSObject.Properties.Remove('gateway') }
    $strippedJson = ConvertTo-Json $data -Depth 100 -Compress
    $stripped = if ($strippedJson -eq $before) { $Raw } else { (ConvertTo-Json $data -Depth 100) + "`n" }
    if (-not $Set) { return @{ Stripped = $stripped; New = $stripped } }
    if ($data.PSObject.Properties['gateway']) { return @{ Error = 'it already stores a key named "gateway" that is not a gateway key; left alone' } }
    $data | Add-Member -NotePropertyName gateway -NotePropertyValue $Key
    $new = if ((ConvertTo-Json $data -Depth 100 -Compress) -eq $before) { $Raw } else { (ConvertTo-Json $data -Depth 100) + "`n" }
    return @{ Stripped = $stripped; New = $new }
}

# llm's user directory, as llm finds it on Windows: LLM_USER_PATH, else %APPDATA%\io.datasette.llm.
function Get-LlmDir {
    if ($env:LLM_USER_PATH) { return $env:LLM_USER_PATH }
    $appData = if ($env:APPDATA) { $env:APPDATA } else { Join-Path $HomeDir 'AppData\Roaming' }
    return Join-Path $appData 'io.datasette.llm'
}

# A YAML double-quoted scalar.
function ConvertTo-YamlString([string]$Value) { return '"' + $Value.Replace('\', '\\').Replace('"', '\"') + '"' }

# The files the installer created (one path a line): the uninstaller deletes such a file once it
# holds nothing but the gateway's entries, instead of leaving an empty file behind.
$LocalAppData = if ($env:LOCALAPPDATA) { $env:LOCALAPPDATA } else { Join-Path $HomeDir 'AppData\Local' }
$Manifest = Join-Path $LocalAppData 'gateway-installer\created-files.txt'

function Get-Created {
    if (-not (Test-Path -LiteralPath $Manifest -PathType Leaf)) { return @() }
    return @([IO.File]::ReadAllLines($Manifest) | Where-Object { $_ })
}

function Test-Created([string]$File) { return (@(Get-Created) -contains $File) }

function Add-Created([string]$File) {
    $list = @(Get-Created)
    if ($list -contains $File) { return }
    $dir = Split-Path -Parent $Manifest
    if (-not (Test-Path -LiteralPath $dir)) { New-Item -ItemType Directory -Path $dir -Force | Out-Null }
    [IO.File]::WriteAllLines($Manifest, [string[]]($list + $File))
}

# Keeps the lines of files that still exist and are not File; an empty manifest is deleted.
function Remove-Created([string]$File) {
    if (-not (Test-Path -LiteralPath $Manifest -PathType Leaf)) { return }
    $keep = @(Get-Created | Where-Object { $_ -ne $File -and (Test-Path -LiteralPath $_) })
    if ($keep.Count -gt 0) { [IO.File]::WriteAllLines($Manifest, [string[]]$keep); return }
    Remove-Item -LiteralPath $Manifest -Force
    $dir = Split-Path -Parent $Manifest
    if (-not (Get-ChildItem -LiteralPath $dir -Force)) { Remove-Item -LiteralPath $dir -Force }
}

# Nothing left but white space (a text file) or an empty object (a JSON file).
function Test-HoldsNothing([string]$Text) {
    $t = "$Text" -replace '\s', ''
    return (-not $t) -or $t -eq '{}'
}

function Get-BackupName([string]$File) {
    $b = "$File.bak-$(Get-Date -Format 'yyyyMMdd-HHmmss')"
    # Never overwrite an earlier backup taken within the same second.
    while (Test-Path -LiteralPath $b) { Start-Sleep -Seconds 1; $b = "$File.bak-$(Get-Date -Format 'yyyyMMdd-HHmmss')" }
    return $b
}

# The applications to act on, from -Apps/-All or asked.
function Step-Apps([string]$Prompt) {
    if ($All) { $list = $AllApps }
    elseif ($Apps) { $list = @(Split-List $Apps) }
    else { $list = @(Split-List @(Read-Answer $Prompt 'all')) }
    if ($list -contains 'all') { $list = $AllApps }
    $out = @()
    foreach ($a in $list) {
        if ($AllApps -notcontains $a) { Fail "unknown application '$a' (choose from: $($AllApps -join ', '))" }
        if ($out -notcontains $a) { $out += $a }
    }
    if ($out.Count -eq 0) { Fail 'no application chosen' }
    $script:ChosenApps = $out
    Add-Summary 'ok' 'apps' ($out -join ', ')
}
