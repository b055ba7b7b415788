	esac
	((COMP_CWORD > 1)) && cmd="${COMP_WORDS[1]}"
	case "$cmd" in
	collect | explain | node-check | fix | watch | help | version | completion) ;;
	*) cmd="" ;;
	esac
	if [[ $cur == -* ]]; then
		case "$cmd" in
		collect) COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		explain) COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		node-check) COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		fix) COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		watch) COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		"") COMPREPLY=($(compgen -W %q -- "$cur")) ;;
		esac
		return
	fi
	case "$cmd" in
	help) ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W %q -- "$cur")) ;;
	completion) ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")) ;;
	version | explain | node-check) ;;
	*)
		local words="$("${COMP_WORDS[0]}" __complete-hosts 2>/dev/null)"
		((COMP_CWORD == 1)) && words="%s $words"
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
		;;
	esac
}
complete -o default -F _gputriage gputriage
